"""Threads of the program that outlive its entrypoint: `polybus run` waits for them as
Python would, says which once the wait lasts, and a signal ends it (in the interpreter's
wait at exit a SIGTERM was ignored, the run ending with status 0, or, consumed by the
run just before, left the process deaf while the threads looped over failing calls).
A call such a thread makes once the run has ended says what happened."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from integration.conftest import Procs, finish, read_line
from polybus.testing.apps import write_app

SERVER = """
    def echo(x):
        return x
"""

CLIENT = """
    import os, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from polybus import use, wait

    echo = use("echo")
    pool = ThreadPoolExecutor(2)  # never shut down: Python's exit steps stop its threads

    def forever():
        try:
            wait(echo(1))
        except Exception:  # (the run may have ended: main raised at once)
            pass
        while True:
            time.sleep(0.05)

    def late(path):
        go = path + ".go"  # (made by the test once the run says it waits for this thread)
        while not os.path.exists(go):
            time.sleep(0.02)
        try:
            echo(2)
            said = "answered"
        except Exception as exc:
            said = f"{type(exc).__name__}: {exc}"
        with open(path, "w") as f:
            f.write(said)

    def main(path, mode):
        assert list(pool.map(abs, [-1, -2])) == [1, 2]
        if mode == "pool":
            return "returned"
        if mode != "late":
            threading.Thread(target=forever, name="forever").start()
        threading.Thread(target=late, args=(path,), name="late").start()
        if mode == "raise":
            raise ValueError("the entrypoint failed")
        return "returned"
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [{path!r}, {mode!r}]

    [bind]
    "client.echo" = "server.echo"
"""

WAITING = (r"^polybus run: waiting for the program's threads still running \({}\); Ctrl-C or "
           r"SIGTERM ends the run$")


def _start(procs: Procs, tmp_path: Path, mode: str) -> tuple[Path, subprocess.Popen[str]]:
    said = tmp_path / "said.txt"
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(path=str(said), mode=mode))
    return said, procs.start("run", app, "--quiet", cwd=tmp_path)


def test_the_run_waits_for_the_program_threads_and_says_which(procs: Procs,
                                                              tmp_path: Path) -> None:
    said, p = _start(procs, tmp_path, "late")
    assert p.stderr is not None
    read_line(p.stderr, WAITING.format("late"), timeout=60)
    Path(f"{said}.go").touch()
    out, _ = finish(p, 30)
    assert p.returncode == 0
    assert out.strip() == "returned"
    assert said.read_text() == (
        "UsageError: echo(2) (client.py, line 22) was called outside a polybus run: the run's "
        "entrypoint returned, and a run takes calls only while its entrypoint runs (the "
        "process may still be waiting for the program's threads); join a thread that makes "
        "calls before the entrypoint returns")


def test_an_idle_thread_pool_left_open_does_not_hold_the_run(procs: Procs,
                                                             tmp_path: Path) -> None:
    _, p = _start(procs, tmp_path, "pool")
    out, err = finish(p, 30)
    assert p.returncode == 0, err
    assert out.strip() == "returned" and "waiting for" not in err


def _ended_by(p: subprocess.Popen[str], sig: signal.Signals, said: str) -> None:
    """Once ``p`` says it waits for its two threads, ``sig`` ends it at once, saying
    ``said`` and that the two threads go with it."""
    assert p.stderr is not None
    read_line(p.stderr, WAITING.format("forever, late"), timeout=60)
    p.send_signal(sig)
    read_line(p.stderr, rf"^polybus run: {said}; 2 thread\(s\) of the program were still "
                        r"running and end with it$", timeout=20)
    finish(p, 20)
    assert p.returncode == 128 + sig


def test_sigterm_ends_a_run_whose_thread_never_ends(procs: Procs, tmp_path: Path) -> None:
    _, p = _start(procs, tmp_path, "forever")
    _ended_by(p, signal.SIGTERM, "terminated")


def test_sigterm_ends_a_run_whose_entrypoint_raised_with_a_thread_left(
        procs: Procs, tmp_path: Path) -> None:
    _, p = _start(procs, tmp_path, "raise")
    assert p.stderr is not None
    read_line(p.stderr, r"^polybus run: the client raised ValueError$", timeout=60)
    _ended_by(p, signal.SIGINT, "interrupted")
