"""`polybus serve` starts again the local workers that end on their own.

`run` ends with its program, and a worker that dies there stays dead (its calls go to
the replicas left, docs/reliability.md). A served program lives on, so under `serve`
the local engine's workers are watched: one whose process ended while the engine was
not stopping it (a crash, the OOM killer, a stray SIGKILL) is started again under the
same name, appending to the same log, after a pause. The front door then finds it in
the registry as it finds any replacement (http/revival.py).

Only an end that is a failure counts (systemd's ``Restart=on-failure``): a non-zero exit
status or a signal that killed it. A worker that exits 0 ended cleanly (a SIGTERM of its
own, from an operator stopping that one worker, or sent to serve's whole process group
as it stops) and is said, not started again. Restarts stop at serve's first stop signal
(`halt`), before its requests in flight are given their grace.

The pause is ``[serve] restart_pause`` (RESTART_S unless set), doubled each time the
same worker ends within STABLE_S of its last start, up to RESTART_MAX_S (a module that
fails at import is retried every 30 s, not in a loop); a worker that ran STABLE_S or
longer before it ended starts again after the first pause. Each end and each start
again is said on the engine's stream, with the worker's exit status and its log's last
line. `[serve] restart = false` turns it off.

A worker started again is started from the supervisor's thread, and a worker ends when
the thread that started it ends (``PR_SET_PDEATHSIG``, worker/lifetime.py): the thread
therefore lives until the engine stops, whatever one look raises, and `halt` does not end
it. (It did: at serve's first signal each worker started again got SIGTERM at once, and
its requests in flight failed within their grace, serve warning that the replica "was
lost" though it was serve that stopped it.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from polybus.engines.local import LocalEngine

__all__ = ["RESTART_MAX_S", "RESTART_S", "STABLE_S", "Supervisor"]

RESTART_S = 0.5       # the first pause before a worker that ended starts again
RESTART_MAX_S = 30.0  # the longest pause, for a worker that keeps ending at once
STABLE_S = 60.0       # a worker that ran this long before it ended: a first pause again
POLL_S = 0.1          # how often the workers' processes are looked at


@dataclass
class _Watch:
    started: float          # time.monotonic() of its last start
    pause: float = RESTART_S
    due: float | None = None  # when it starts again, once seen ended
    restarts: int = 0
    clean: bool = False       # ended with status 0 (said, not started again)


class Supervisor:
    """Watches a local engine's workers from a thread of its own until `stop`."""

    def __init__(self, engine: LocalEngine, say: TextIO | None,
                 first: float = RESTART_S) -> None:
        """``first``: the first pause before a worker that ended starts again."""
        self.engine = engine
        self.say = say
        self.first = first
        self._stop = threading.Event()    # the thread ends (the engine stops its workers)
        self._halted = threading.Event()  # no look, no restart (serve is stopping)
        now = time.monotonic()
        self.watches = {name: _Watch(now, first) for name, _, _ in engine.procs}
        self._thread = threading.Thread(target=self._loop, name="polybus-supervisor",
                                        daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def halt(self) -> None:
        """No restart from now on (serve is stopping); returns at once. The thread lives
        on until `stop`: the workers it started again end with it."""
        self._halted.set()

    def stop(self) -> None:
        """No restart from now on; returns once the thread has ended (a start under
        way finishes first, and is listed for the engine to stop)."""
        self._halted.set()
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            if self._halted.is_set():  # (its workers stay until the engine stops them)
                continue
            try:
                self.step(time.monotonic())
            except Exception as exc:  # (the thread must live on: see the docstring)
                self._said(f"could not look at the workers: {exc!r}")

    def step(self, now: float) -> None:
        """One look: note the workers that ended, start again those whose pause is over."""
        from polybus.engines.local import ended_line

        with self.engine.lock:
            ended = [(name, code, log) for name, proc, log in self.engine.procs
                     if (code := proc.poll()) is not None]
        for name, code, log in ended:
            w = self.watches.setdefault(name, _Watch(now, self.first))
            if code == 0:  # ended cleanly: said once, not started again
                if not w.clean:
                    w.clean = True
                    self._said(f"{ended_line(name, code, log)}; it ended cleanly, so it "
                               "is not started again")
                continue
            if w.due is None:
                w.pause = self.first if now - w.started >= STABLE_S else w.pause
                w.due = now + w.pause
                self._said(f"{ended_line(name, code, log)}; starting it again in "
                           f"{w.pause:g} s")
            elif now >= w.due and not self._halted.is_set():
                try:
                    started = self.engine.respawn(name)
                except OSError as exc:  # (no process to be had now: tried again later)
                    self._said(f"worker {name} could not be started again: {exc}")
                    started = None
                w.due = None
                if started is not False:  # (a failed start counts as a quick end: it backs off)
                    w.started = now
                    w.pause = min(w.pause * 2, RESTART_MAX_S)
                if started:
                    w.restarts += 1
                    self._said(f"worker {name} started again (restart {w.restarts})")

    def _said(self, line: str) -> None:
        if self.say is not None:
            try:
                print(f"polybus serve: {line}", file=self.say, flush=True)
            except (OSError, ValueError):  # (a closed stream: nothing more to say)
                pass
