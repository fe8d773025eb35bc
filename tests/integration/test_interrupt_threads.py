"""Ctrl-C or SIGTERM while threads of the program wait inside polybus (a sync call, a
wait, as_completed, a wait with a timeout): the run ends with its status and line, its
replicas with it, and each thread's wait says its run ended (StalePromiseError), as a
wait begun after the end does. A wait already reading when the session closed touched
the closed selector and sockets: `ValueError: I/O operation on closed epoll object`
out of the thread, and a warning that each replica "was lost" (its connection "broke:
Bad file descriptor") under the run's interrupted line."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from integration.conftest import Procs, descendants, finish, read_line, wait_gone
from polybus.testing.apps import write_app

SERVER = """
    import threading

    def slow(x):
        threading.Event().wait(60)  # (answered only if nobody stops the run first)
        return x
"""

CLIENT = """
    import sys, threading, time
    from polybus import as_completed, use, wait

    slow = use("slow")
    aslow = use("aslow")

    def in_sync():
        slow(1)

    def in_wait():
        wait(aslow(2))

    def in_as_completed():
        for _ in as_completed([aslow(3)]):
            pass

    def in_wait_timeout():
        p = aslow(4)
        while True:
            try:
                return wait(p, timeout=0.05)
            except TimeoutError:
                pass

    def inside(thread):
        frame = sys._current_frames().get(thread.ident)
        while frame is not None:
            if frame.f_code.co_name in ("_wait", "_step", "call_alone", "_completed"):
                return True
            frame = frame.f_back
        return False

    def main(said, how):
        def run(fn):
            try:
                fn()
                out = "answered"
            except BaseException as exc:
                out = f"{type(exc).__name__}: {exc}"
            with open(f"{said}/{fn.__name__}", "w") as f:
                f.write(out)

        threads = [threading.Thread(target=run, args=(fn,), name=fn.__name__)
                   for fn in (in_sync, in_wait, in_as_completed, in_wait_timeout)]
        for t in threads:
            t.start()
        while not all(inside(t) for t in threads):
            time.sleep(0.01)
        print("waiting", flush=True)
        if how == "raise":
            raise RuntimeError("the entrypoint stops")
        for t in threads:
            t.join()
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = {transport!r}
    define.slow = {{ pool = 4 }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [{said!r}, {how!r}]
    use.aslow = {{ callstyle = "async" }}

    [bind]
    "client.slow" = "server.slow"
    "client.aslow" = "server.slow"
"""

THREADS = ("in_sync", "in_wait", "in_as_completed", "in_wait_timeout")


def _start(procs: Procs, tmp_path: Path, how: str,
           transport: str = "tcp") -> tuple[Path, subprocess.Popen[str]]:
    """The run, once its four threads wait inside polybus; where they say what they got."""
    said = tmp_path / "said"
    said.mkdir()
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(said=str(said), how=how, transport=transport))
    p = procs.start("run", app, "--no-worker-output", cwd=tmp_path)
    assert p.stdout is not None
    read_line(p.stdout, "^waiting$", timeout=60)
    return said, p


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_threads_waiting_inside_polybus_when_the_entrypoint_raises_hear_the_run_ended(
        procs: Procs, tmp_path: Path, transport: str) -> None:
    """The run ends with the program's error; its threads, waited for at exit, each get
    StalePromiseError naming the call it waited for (a sync call and a wait got
    ConnectionLostError: the replicas stopping with the run were taken for lost, the
    sync call run again on the other one, and said to be what may have ended them)."""
    said, p = _start(procs, tmp_path, "raise", transport)
    _, err = finish(p, 60)
    assert p.returncode == 1, err
    assert "RuntimeError: the entrypoint stops" in err
    assert "was lost" not in err, err
    for name in THREADS:
        got = (said / name).read_text()
        assert got.startswith("StalePromiseError: "), f"{name}: {got}"
    assert "slow(1) of server-" in (said / "in_sync").read_text()
    assert "slow(2) of server-" in (said / "in_wait").read_text()


@pytest.mark.parametrize(("sig", "word", "code"), [(signal.SIGINT, "interrupted", 130),
                                                   (signal.SIGTERM, "terminated", 143)])
def test_threads_waiting_inside_polybus_when_the_run_is_stopped_end_with_it(
        procs: Procs, tmp_path: Path, sig: signal.Signals, word: str, code: int) -> None:
    """The run's status and line, its replicas gone, and no loss said of them (each
    "was lost", its connection "closed", under the interrupted line)."""
    _, p = _start(procs, tmp_path, "join")
    workers = descendants(p.pid)
    procs.watch(workers)
    p.send_signal(sig)  # (the run this test started)
    _, err = finish(p, 60)
    assert p.returncode == code, err
    assert f"polybus run: {word}" in err
    assert wait_gone(workers, timeout=20) == set()
    assert "was lost" not in err and "Traceback" not in err, err
