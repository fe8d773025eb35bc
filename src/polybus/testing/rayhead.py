"""A Ray cluster's head started once, on loopback only, for runs of the ray engine to
join (``$RAY_ADDRESS``), as a cluster's users join the head its operator started.

`ray_head(cpus)` starts ``ray start --head --block`` in a private loopback-only network
namespace, in a session of its own, with a token of its own (``RAY_AUTH_MODE=token``),
and waits until it is up; it yields a `RayHead`, whose `prefix` runs a command in the
head's namespace (``nsenter``) and whose `env` makes a run there join it. A joined run
starts its actors on the head's node and kills them when it ends; `actors` tells which
of them still live. On the way out the head's session is ended (SIGTERM, then SIGKILL)
and every process of its left is killed, by PID, however the checks went.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from polybus.testing.proctree import descendants

__all__ = ["RayHead", "ray_head", "tree"]

START_S = 120.0  # for the head to say it is up (Ray's start is slow on a busy machine)
STOP_S = 10.0  # after SIGTERM, before SIGKILL
PORT = 6379  # (the namespace is the head's alone: Ray's default port is free there)
_UP = "block forever"  # what ``ray start --block`` says once the head is up


def tree(pid: int) -> set[int]:
    """``pid`` and every process descended from it, from /proc."""
    return {pid} | descendants(pid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


@dataclass
class RayHead:
    """A running head: ``prefix`` + a command runs it in the head's network namespace,
    with ``env`` added to its environment to join the head."""

    proc: subprocess.Popen[bytes]
    prefix: list[str]
    env: dict[str, str]
    log: Path  # what ``ray start`` printed

    def processes(self) -> set[int]:
        """The head's processes now: its daemons and Ray's workers."""
        return tree(self.proc.pid)

    def actors(self, name: str = "_Replica") -> set[int]:
        """The live processes of actors of class ``name`` (Ray titles each
        ``ray::<class>``; an idle worker's is ``ray::IDLE``)."""
        return {p for p in self.processes() if _cmdline(p).startswith(f"ray::{name}")}

    def enterable(self) -> bool:
        """True if a command can be run in the head's namespace (``nsenter`` is there,
        and permitted)."""
        try:
            return subprocess.run([*self.prefix, "true"], capture_output=True,
                                  timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def said(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def _nsenter(pid: int) -> list[str]:
    """``nsenter`` argv that runs a command in process ``pid``'s network namespace (and,
    not as root, its user namespace: ``unshare -rn`` made both)."""
    nsenter = shutil.which("nsenter") or "nsenter"
    if os.geteuid() == 0:
        return [nsenter, f"--net=/proc/{pid}/ns/net"]
    return [nsenter, "-t", str(pid), "-U", "-n", "--preserve-credentials"]


def _wait_for(head: RayHead, words: str, seconds: float) -> bool:
    """True once the head has said ``words``; False if it ended first or ``seconds``
    passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if words in head.said():
            return True
        if head.proc.poll() is not None:
            return words in head.said()
        time.sleep(0.1)
    return False


def _end(head: RayHead) -> None:
    """SIGTERM the head (``ray start``, which stops its daemons: a SIGTERM to its whole
    group at once left it waiting), SIGKILL its session if it is still there after
    STOP_S; then kill, by PID, whatever of the head is left (Ray puts its workers in
    groups of their own)."""
    left = {pid: _cmdline(pid) for pid in head.processes() - {head.proc.pid}}
    with contextlib.suppress(ProcessLookupError):
        os.kill(head.proc.pid, signal.SIGTERM)
    try:
        head.proc.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.proc.pid, signal.SIGKILL)
        head.proc.wait()
    for pid, argv in left.items():
        if argv and _cmdline(pid) == argv:  # (still the same process: not a PID reused)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


@contextmanager
def ray_head(prefix: list[str], cpus: int) -> Iterator[RayHead]:
    """A head of ``cpus`` CPUs started with ``prefix`` (a loopback-only namespace's
    ``unshare`` argv: `polybus.bench.peers._driver.loopback_only_prefix`), up; ended on
    the way out."""
    # (short: Ray's socket paths under it must stay within 107 bytes)
    temp = tempfile.mkdtemp(prefix="polybus-rayhead-",
                            dir="/tmp" if len(tempfile.gettempdir()) > 40 else None)
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0"}
    argv = [*prefix, sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
            "--block", f"--port={PORT}", "--node-ip-address=127.0.0.1",
            f"--num-cpus={cpus}", "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={temp}"]
    log = Path(temp) / "head.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **env})
    head = RayHead(proc, _nsenter(proc.pid), {**env, "RAY_ADDRESS": f"127.0.0.1:{PORT}"},
                   log)
    try:
        if not _wait_for(head, _UP, START_S):
            raise AssertionError(f"the Ray head did not start within {START_S:g} s:\n"
                                 f"{head.said()[-3000:]}")
        yield head
    finally:
        _end(head)
        shutil.rmtree(temp, ignore_errors=True)
