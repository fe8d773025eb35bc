"""The local engine: an embedded registry and worker processes on this machine."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from polybus.config.model import AppConfig
from polybus.engines.base import Cluster, run_registry
from polybus.engines.launchenv import blas_threads
from polybus.engines.logfollow import LogFollower, is_banner
from polybus.engines.rundir import make_run_dir, remove_stale_run_dirs
from polybus.errors import PolybusError, TransportError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.token import ENV, make_token
from polybus.usercode import SLOW_IMPORT, shown, stuck_at
from polybus.worker.lifetime import how_it_ended

if TYPE_CHECKING:
    from polybus.engines.supervise import Supervisor

log = logging.getLogger("polybus.engine")

# Every worker must register within this, in seconds (not configurable; `--timeout` and
# a run's ``timeout`` count from the entrypoint's start, after it): a worker imports its
# module first, and one still importing after SLOW_IMPORT is said while the run waits.
START_TIMEOUT = 60.0
# How long a lost worker's end is waited for, off the reactor's path, before its loss is
# said without it (its connections close a moment before it is reaped: `how_ended`)
ENDED_LATER_S = 1.0
# numpy's BLAS starts a thread per CPU in every process: each worker gets its share of
# the CPUs instead, unless the user set any of these (engines/launchenv.py).

class LocalEngine:
    """Starts ``replication`` worker processes per server module; stops every one of them.

    Each worker's stdout and stderr go to a log file of its own. With ``echo``, once
    every worker has registered, their lines are forwarded there as they come, each
    prefixed with its worker's name (engines/logfollow.py), until `stop`; with or
    without it, what has been read of a log is freed as it grows (logfollow.py). The
    logs and the ipc/shm socket files are in the run's own directory, which `stop`
    removes; `start` first removes those that runs killed outright left (rundir.py)."""

    def __init__(self, app: AppConfig, overrides: tuple[str, ...] = (),
                 start_timeout: float = START_TIMEOUT, echo: TextIO | None = None,
                 slow: float = SLOW_IMPORT) -> None:
        self.app = app
        self.echo = echo
        self.slow = slow  # seconds before workers not yet registered are said (`_wait_ready`)
        self.follower: LogFollower | None = None
        self.overrides = overrides
        self.start_timeout = start_timeout  # for every worker to register, in seconds
        self.token = make_token()
        self.registry: RegistryService | None = None
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.rundir: Path | None = None  # private (0700) home of the logs and socket files
        self.keys: dict[str, str] = {}  # each worker's module key, by worker name
        self.lock = threading.Lock()  # over procs, for a supervisor's restarts
        self.supervisor: Supervisor | None = None
        self._spawned = 0  # workers started so far (each its own socket file names)

    def start(self) -> Cluster:
        t0 = time.perf_counter()
        try:
            remove_stale_run_dirs()  # (what runs killed outright left)
            self.rundir = make_run_dir()
            self.registry = run_registry(self.app.cluster, self.token)
            for module in self.app.servers():
                for replica in module.replication:
                    self._spawn(module.key, replica.name)
            self._wait_ready()
            # (Not while they start: a start that fails reports the worker's own words,
            # and the stacks asked of one that is slow, in its error.) Without echo the
            # lines are read and dropped: the logs' read parts are freed either way.
            self.follower = LogFollower([(n, log) for n, _, log in self.procs],
                                        self.echo).start()
        except BaseException:
            self.stop()
            raise
        return Cluster(str(self.registry.address), self.token, time.perf_counter() - t0,
                       how_ended=self.how_ended, how_ended_later=self.how_ended_later,
                       registrations=self._registrations)

    def _registrations(self, tell: Callable[[str], None] | None) -> None:
        """``tell`` is told the module of each worker that registers from now on (None:
        no more), as `Cluster.registrations` says."""
        registry = self.registry
        if registry is not None:
            registry.on_register = None if tell is None else (lambda r: tell(r.module))

    def supervise(self, say: TextIO | None) -> Supervisor:
        """From now until `stop` (or its `halt`), start again each worker that fails on
        its own (engines/supervise.py), saying so on ``say``."""
        from polybus.engines.supervise import RESTART_S, Supervisor

        if self.supervisor is None:
            serve = self.app.serve
            first = RESTART_S if serve is None else serve.restart_pause
            self.supervisor = Supervisor(self, say, first).start()
        return self.supervisor

    def respawn(self, name: str) -> bool:
        """Start worker ``name`` again in the place of its ended process, appending to
        its log; False if it is running, or gone with `stop`."""
        with self.lock:
            at = next((i for i, (n, _, _) in enumerate(self.procs) if n == name), None)
            if at is None or self.procs[at][1].poll() is None or self.registry is None:
                return False
            self.procs[at] = self._spawn(self.keys[name], name, place=False)
            return True

    def _spawn(self, key: str, name: str, place: bool = True
               ) -> tuple[str, subprocess.Popen[bytes], Path]:
        """Start worker ``name`` of module ``key``; listed in ``procs`` (``place``) as
        soon as it is started, so that `stop` ends it whatever happens next."""
        assert self.registry is not None and self.rundir is not None
        log = self.rundir / f"{name}.log"
        proc: subprocess.Popen[bytes] | None = None
        self.keys[name] = key
        try:
            # (-P: the folder the run was started in is not the program's; a file there
            # named like a module the worker imports would be imported in its place)
            cmd = [sys.executable, "-P", "-m", "polybus", "worker", "--registry",
                   str(self.registry.address), "--config", str(self.app.path), "--as", key,
                   "--name", name, "--exit-with-parent", "--parent", str(os.getpid())]
            for scheme in transports_for(self.app, key):
                cmd += ["--listen", self._address(scheme, self._spawned)]
            self._spawned += 1
            for o in self.overrides:
                cmd += ["--set", o]
            # Unbuffered: a line printed is in the log at once, for the follower and
            # for the death diagnostics, in the worker and any Python it starts (its
            # process pool). The worker makes its own stdout line-buffered
            # (worker/main.py), so a line is one write.
            replicas = sum(len(m.replication) for m in self.app.servers())
            pinned = self.app.modules[key].cpus_of(name)  # (its cpus: pinning.py)
            env = dict(os.environ, **blas_threads(os.environ, replicas, pinned),
                       **{ENV: self.token.decode(), "PYTHONUNBUFFERED": "1"})
            with open(log, "ab") as out:  # (appends: several processes write to it)
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=out, env=env)
        finally:  # (a Ctrl-C here too: stop() ends what is listed and removes its log)
            if proc is not None and place:
                self.procs.append((name, proc, log))
            elif proc is None and place:
                log.unlink(missing_ok=True)
        assert proc is not None  # (Popen raised otherwise)
        return name, proc, log

    def _address(self, scheme: str, index: int) -> str:
        if scheme == "tcp":
            return f"tcp://{self.app.cluster.listen_host}:0"
        assert self.rundir is not None
        # The directory is 0700: only this user can reach the sockets (each also 0600).
        return f"{scheme}://{self.rundir / f'{index}.{scheme}'}"

    def _wait_ready(self) -> None:
        assert self.registry is not None
        expected = {name for name, _, _ in self.procs}
        client = RegistryClient(str(self.registry.address), self.token)
        start = time.monotonic()
        deadline = start + self.start_timeout
        said = False
        try:
            while True:
                for name, proc, path in self.procs:
                    if proc.poll() is not None:
                        raise PolybusError(_start_failure(name, proc.returncode, path))
                have = {r.name for r in client.resolve()}
                if expected <= have:
                    return
                if not said and time.monotonic() - start >= self.slow:
                    said = True  # (`polybus check` says the same of an import: usercode.py)
                    log.warning("polybus: %s", self._slow(sorted(expected - have)))
                if time.monotonic() > deadline:
                    raise TransportError(self._not_registered(sorted(expected - have)))
                time.sleep(0.02)
        finally:
            client.close()

    def _slow(self, missing: list[str]) -> str:
        """What the run waits for once `slow` has passed: workers ``missing`` have not
        registered, and each imports its module first."""
        sources = {r.name: m.source for m in self.app.servers() for r in m.replication}
        files = " or ".join(dict.fromkeys(shown(sources[n]) for n in missing))
        who = f"worker{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        return (f"{who} not registered after {self.slow:g} s: a worker imports its module "
                f"({files}) before it registers; waiting up to {self.start_timeout:g} s "
                "for it")

    def _not_registered(self, missing: list[str]) -> str:
        """Why workers ``missing`` did not register in time, as far as can be told: a
        worker imports its module first, and those still running are asked (SIGUSR1,
        cli/main.py) where they stand in its file."""
        sources = {r.name: m.source for m in self.app.servers() for r in m.replication}
        files = " or ".join(dict.fromkeys(shown(sources[n]) for n in missing))
        who = f"worker{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        text = (f"{who} did not register within {self.start_timeout:g} s: a worker imports "
                "its module before it registers, and slow or blocking top-level code in "
                f"{files} keeps it from registering")
        running = [(n, p, log) for n, p, log in self.procs if n in missing and p.poll() is None]
        at = _lines_running(running, sources)
        for n, _, _ in running:
            where = f", at {shown(sources[n])} line {at[n]}" if n in at else ""
            text += f"; {n} was still running{where}"
        return text

    def ended(self, settle: float = 0.0) -> list[str]:
        """One line for each worker that ended before it was stopped: its exit status or
        signal, and the last line of its log. ``settle``: wait up to this long for one
        to be reaped (a worker's connections close as it exits, a moment before)."""
        deadline = time.monotonic() + settle
        while any(p.poll() is None for _, p, _ in self.procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        return [ended_line(name, code, log) for name, proc, log in self.procs
                if (code := proc.poll()) is not None]

    def how_ended(self, name: str, settle: float = 0.05) -> str | None:
        """How worker ``name`` ended ("exited with status 3", "was killed by signal 9
        (SIGKILL)"), waiting up to ``settle`` s for it to be reaped (its connections
        close a moment before it is); None if it still runs, or is not one of these."""
        deadline = time.monotonic() + settle
        for n, proc, _ in reversed(self.procs):  # (the latest of that name: a restart)
            if n != name:
                continue
            while (code := proc.poll()) is None and time.monotonic() < deadline:
                time.sleep(0.005)
            return None if code is None else how_it_ended(code)
        return None

    def how_ended_later(self, name: str) -> str | None:
        """`how_ended`, waiting up to ``ENDED_LATER_S`` (asked on a thread of its own
        when the quick look had nothing, client/lossline.py): on a loaded machine a
        worker is reaped more than the quick look's 50 ms after its connections close."""
        return self.how_ended(name, settle=ENDED_LATER_S)

    def stop(self) -> None:
        """SIGTERM every worker this engine started, SIGKILL what is left after 3 s, or
        at once if the wait is interrupted (a second Ctrl-C): the run's directory
        (logs, socket files) and the registry go either way. What the workers printed until they
        ended is forwarded (``echo``) before their logs go. A supervisor stops first:
        nothing is started again meanwhile."""
        try:
            if self.supervisor is not None:
                self.supervisor.stop()
            for _, proc, _ in self.procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 3.0
            for _, proc, _ in self.procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self._release()

    def _release(self) -> None:
        with self.lock:  # (a restart interrupted by a second Ctrl-C has finished)
            self._release_locked()

    def _release_locked(self) -> None:
        try:
            for _, proc, _ in self.procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if self.follower is not None:
                self.follower.close()
        finally:
            self.follower = None
            for _, proc, log in self.procs:
                if proc.poll() is None:  # (the wait above interrupted)
                    proc.kill()
                try:
                    log.unlink()
                except OSError:
                    pass
            self.procs.clear()
        if self.rundir is not None:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self.rundir = None
        if self.registry is not None:
            self.registry.close()
            self.registry = None


def transports_for(app: AppConfig, key: str) -> list[str]:
    """What a replica of module ``key`` listens on: its module's transport first (its
    main address), then any other a binding to it asks for, and always tcp."""
    out: list[str] = [app.modules[key].transport]
    for b in app.bindings:
        if b.module == key:
            use = app.modules[b.user].use.get(b.name)
            if use is not None and use.transport and use.transport not in out:
                out.append(use.transport)
    if "tcp" not in out:
        out.append("tcp")
    return out


def _lines_running(procs: list[tuple[str, subprocess.Popen[bytes], Path]],
                   sources: dict[str, Path], wait: float = 1.0) -> dict[str, int]:
    """The line of its module's file each of ``procs`` is running, by name: from the
    stacks a worker prints to its log on SIGUSR1, read for at most ``wait`` seconds. A
    worker not in its file (or not answering) is left out."""
    sizes = {}
    for name, proc, log in procs:
        try:
            sizes[name] = log.stat().st_size
            proc.send_signal(signal.SIGUSR1)
        except OSError:
            pass
    found: dict[str, int] = {}
    deadline = time.monotonic() + wait
    while len(found) < len(sizes) and time.monotonic() < deadline:
        time.sleep(0.02)
        for name, _, log in procs:
            if name in sizes and name not in found:
                try:
                    with open(log, "rb") as f:
                        f.seek(sizes[name])
                        dump = f.read().decode(errors="replace")
                except OSError:
                    continue
                line = stuck_at(dump, sources[name])
                if line is not None:
                    found[name] = line
    return found


_ERROR_LINE = "polybus worker: error: "


def ended_line(name: str, code: int, log: Path) -> str:
    """What became of worker ``name``: how it ended, and its log's last line."""
    last = next((ln.strip() for ln in reversed(_tail(log, 20).splitlines())
                 if ln.strip() and ln != "(no output)"
                 and not is_banner(name, ln)), "")  # (the banner says nothing)
    return f"worker {name} {how_it_ended(code)}" + (f"; its log ends: {last}" if last else "")


def _start_failure(name: str, status: int, log: Path) -> str:
    """Why worker ``name`` did not start: the error it reported (a module that does not
    import, a bad option) without the rest of its output, else the end of its output
    (said to be none when it printed nothing, as a worker killed while starting)."""
    text = _tail(log)
    at = text.find(_ERROR_LINE)
    if at >= 0:
        return f"worker {name} could not start: {text[at + len(_ERROR_LINE):]}"
    said = text.strip()
    return (f"worker {name} {how_it_ended(status)} while starting"
            + (f":\n{text}" if said and said != "(no output)" else " (it printed nothing)"))


TAIL_BYTES = 1 << 16  # the end of a log read for diagnostics (logfollow.KEEP keeps it)


def _tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log, read from its last ``TAIL_BYTES`` only (a log
    may be long; its read part is freed, logfollow.py)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            text = f.read().decode(errors="replace")
    except OSError:
        return "(no output)"
    kept = text.splitlines()
    if size > TAIL_BYTES and kept:
        kept = kept[1:]  # (the first may be the end of a longer line)
    return "\n".join(kept[-lines:])
