"""The hosts engine's run, as its user starts it: a registry and a worker per replica
started by hand, then ``polybus run --registry``.

`by_hand` writes a token file, starts ``polybus registry`` on a free loopback port and
``polybus worker --config APP --as server --name server-i`` per replica, all at once
(each listens, as by default, on its module's transport beside TCP), and waits for each
to say it serves (or to end);
the client is then run with ``--registry``. The registry and the workers are ended
afterwards, whatever the outcome (SIGTERM, then SIGKILL, by process group: each is
started in a session of its own), and what they printed is kept, as a terminal that
started them would show it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from polybus.token import make_token, write_token_file
from polybus.transport.ready import ready

__all__ = ["by_hand"]

START_S = 30.0  # for the registry, and each worker, to say it is up
STOP_S = 5.0  # after SIGTERM, before SIGKILL


class _Started:
    """A process of the check's, its output read as it comes (to look for a line)."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.out = b""

    def wait_for(self, pattern: str, seconds: float = START_S) -> re.Match[str] | None:
        """The first match of ``pattern`` in its output; None if it ended first or
        ``seconds`` passed."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if m := re.search(pattern, self.out.decode(errors="replace")):
                return m
            if ready([fd], [], left)[0]:  # (a poll: select() takes no fd past 1,023)
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None  # (it ended)
                self.out += chunk
        return None

    def terminate(self) -> None:
        """SIGTERM its process group (`end` then waits for it)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def end(self) -> str:
        """SIGTERM its process group, SIGKILL it if still there after STOP_S; all it
        printed (once ended, again the same)."""
        if self.proc.returncode is not None:
            return self.out.decode(errors="replace")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):  # (ended already: read the rest)
                os.killpg(self.proc.pid, sig)
            try:
                rest, _ = self.proc.communicate(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                continue
            self.out += rest or b""
            break
        return self.out.decode(errors="replace")


@contextmanager
def by_hand(app: Path, replicas: int, said: list[str], sets: Sequence[str] = (),
            modules: Sequence[str] = ()) -> Iterator[list[str]]:
    """A registry and ``replicas`` workers of module ``server`` of ``app``, started by
    hand; yields what ``polybus run`` is given to use them (``--registry``,
    ``--token-file``). On the way out every one is ended and what they printed is put
    in ``said``, registry first. ``sets``: each worker's ``--set``s (``KEY=VALUE``);
    ``modules``: the names of more workers, started with ``--module`` and the server's
    source file (of no configuration: the defaults)."""
    where = app.parent
    source = where / tomllib.loads(app.read_text())["modules"]["server"]["source"]
    py = [sys.executable, "-m", "polybus"]
    token = str(write_token_file(make_token(), where / "token"))
    started: list[_Started] = []
    try:
        reg = _Started([*py, "registry", "--listen", "127.0.0.1:0", "--token-file", token],
                       where)
        started.append(reg)
        found = reg.wait_for(r"listening on (\S+)")
        if found is None:
            raise AssertionError(f"the registry did not start:\n{reg.end()}")
        registry = found.group(1)
        mine = ["--registry", registry, "--token-file", token]
        workers = [_Started([*py, "worker", "--config", str(app), "--as", "server",
                             *(a for s in sets for a in ("--set", s)),
                             "--name", f"server-{i}", *mine], where) for i in range(replicas)]
        workers += [_Started([*py, "worker", "--module", str(source), "--name", name, *mine],
                             where) for name in modules]
        started.extend(workers)
        for w in workers:  # (all started at once, as by several hands)
            w.wait_for(r"serving")  # (or it ended: the run says what that means)
        yield ["--registry", registry, "--token-file", token]
    finally:
        for s in started:  # (each told at once, then each waited for)
            s.terminate()
        said.extend(s.end() for s in started)
