"""Helpers for tests with real processes on 127.0.0.1.

Every process a test starts goes through `procs`, which kills and reaps it (and any
worker it started, found through /proc) at the end of the test, pass or fail.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, TypeVar

import pytest

from polybus.testing.proctree import descendants
from polybus.transport.channel import Channel
from polybus.wire.messages import Message

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POLYBUS = [sys.executable, "-m", "polybus"]


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    """The pids still alive after ``timeout`` seconds (empty if all went)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p for p in pids if alive(p)}
        if not left:
            return set()
        time.sleep(0.05)
    return {p for p in pids if alive(p)}


def kill_all(pids: set[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def interruptible() -> None:
    """In a child, before exec: SIGINT's default disposition back. A test run a shell
    started in the background (``make test &``, a CI job) inherits SIGINT ignored, and
    Python leaves an ignored SIGINT ignored: the tests that interrupt a run would wait
    for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Procs:
    """Starts processes and guarantees they (and their descendants) end with the test."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []
        self.extra: set[int] = set()   # pids seen (workers) to reap at the end

    def start(self, *args: str | Path, env: dict[str, str] | None = None,
              cwd: Path | None = None, group: bool = False) -> subprocess.Popen[str]:
        """``group``: in a process group of its own, as a terminal's foreground job is,
        so that ``os.killpg(p.pid, SIGINT)`` is a Ctrl-C to it and its children alone."""
        p = subprocess.Popen([*POLYBUS, *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             env=env_with(env), cwd=cwd, preexec_fn=interruptible,
                             process_group=0 if group else None)
        self.started.append(p)
        return p

    def watch(self, pids: set[int]) -> None:
        self.extra |= pids

    def close(self) -> None:
        for p in self.started:
            self.extra |= descendants(p.pid)
        # SIGTERM first: `polybus run`/`serve` then stop their engine, which removes its
        # workers' logs and socket directory from /tmp; SIGKILL what is left after 5 s.
        for p in self.started:
            if p.poll() is None:
                p.terminate()
        for p in self.started:
            try:
                p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                try:
                    p.communicate(timeout=10)
                except (subprocess.TimeoutExpired, ValueError):
                    pass
            except ValueError:
                pass
        kill_all({p for p in self.extra if alive(p)})


def finish(p: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """``p``'s output once it ends; if it has not ended within ``timeout``, fail the test
    with every thread's stack (`polybus` prints them on SIGUSR1) and kill it."""
    try:
        out, err = p.communicate(timeout=timeout)
        return out, err
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        p.kill()
        out, err = p.communicate(timeout=10)
        pytest.fail(f"{p.args} still running after {timeout:g} s; its stacks:\n{err}")


@pytest.fixture
def procs() -> Iterator[Procs]:
    ps = Procs()
    try:
        yield ps
    finally:
        ps.close()


@pytest.fixture
def no_worker_left() -> Iterator[None]:
    """Every process a test's in-process runs (`polybus.run`) started is gone when it
    ends (killed if not: the test then fails rather than leave it)."""
    before = descendants(os.getpid())
    try:
        yield
    finally:
        left = descendants(os.getpid()) - before
        kill_all(left)
    assert not left, f"processes left behind: {sorted(left)}"


def env_with(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "POLYBUS_TOKEN"}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


def cli(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 60,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``polybus ARGS`` to completion (killed with its workers on timeout)."""
    p = subprocess.Popen([*POLYBUS, *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=env_with(env), cwd=cwd)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all(descendants(p.pid))
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"polybus {args} did not finish in {timeout} s:\n{err}") from None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


T = TypeVar("T")


def side_by_side(*runs: Callable[[], T]) -> list[T]:
    """What each of ``runs`` returned, run at once, each in a thread of its own (runs
    of `cli` that do not depend on one another: their starts overlap)."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: run(), runs))


_readers: dict[IO[str], queue.Queue[str]] = {}  # keyed by the pipe itself, kept alive


def read_line(stream: IO[str], pattern: str, timeout: float = 20.0) -> re.Match[str]:
    """Read lines from a text pipe until one matches ``pattern`` (a reader thread per
    pipe, because a buffered text pipe hides lines from select())."""
    q = _readers.get(stream)
    if q is None:
        q = _readers[stream] = queue.Queue()

        def pump(qq: queue.Queue[str] = q) -> None:
            try:
                for line in stream:
                    qq.put(line)
            except (ValueError, OSError):  # the test closed the pipe (its cleanup): done
                pass
            qq.put("")

        threading.Thread(target=pump, daemon=True).start()
    seen = []
    for line in _queued(q, timeout):
        seen.append(line)
        if m := re.search(pattern, line):
            return m
    raise AssertionError(f"no line matching {pattern!r} within {timeout} s; got {seen!r}")


def _queued(q: queue.Queue[str], timeout: float) -> Iterator[str]:
    """The lines a pipe's reader thread queues, until the pipe ends or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = q.get(timeout=left)
        except queue.Empty:
            return
        if not line:
            return
        yield line


def rest_of(stream: IO[str], timeout: float = 20.0) -> str:
    """What is left of a pipe `read_line` has read from, to its end (the process gone)."""
    if stream not in _readers:
        return stream.read()
    return "".join(_queued(_readers[stream], timeout))


def start_registry(procs: Procs, env: dict[str, str] | None = None,
                   *args: str) -> tuple[str, Path | None]:
    """`polybus registry` on a free loopback port: its address, and the token file it
    wrote (None when given a token)."""
    reg = procs.start("registry", "--listen", "127.0.0.1:0", *args, env=env)
    assert reg.stdout is not None
    addr = read_line(reg.stdout, r"listening on (\S+)").group(1)
    made = None
    if env is None and not args:
        made = Path(read_line(reg.stdout, r"token written to (\S+)").group(1))
    return addr, made


def next_message(ch: Channel, timeout: float = 5.0, pause: float = 0.0005) -> Message:
    """The next message on ``ch``, read without blocking, ``pause`` s between looks (0: a
    client that sends its next call at once); AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = ch.next_message()
        if msg is not None:
            return msg
        ch.fill(wait=False)
        if pause:
            time.sleep(pause)
    raise AssertionError("no answer in time")
