"""Threads of the program that outlive its entrypoint: `polybus run` waits for them as
Python would, says so, and a signal still ends it (the interpreter's own wait at exit
took SIGTERM as a silent rc 0, or stayed deaf while the threads looped over failing
calls). A call such a thread makes once the run has ended says what happened."""

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
    from polybus import use, wait

    echo = use("echo")

    def forever():
        wait(echo(1))
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

    def main(path, stuck):
        if stuck:
            threading.Thread(target=forever, name="forever").start()
        threading.Thread(target=late, args=(path,), name="late").start()
        return "returned"
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [{path!r}, {stuck}]

    [bind]
    "client.echo" = "server.echo"
"""


def _start(procs: Procs, tmp_path: Path, stuck: bool) -> tuple[Path, subprocess.Popen[str]]:
    said = tmp_path / "said.txt"
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(path=str(said), stuck=str(stuck).lower()))
    return said, procs.start("run", app, "--quiet", cwd=tmp_path)


def test_the_run_waits_for_the_program_threads_and_says_so(procs: Procs,
                                                           tmp_path: Path) -> None:
    said, p = _start(procs, tmp_path, stuck=False)
    assert p.stderr is not None
    read_line(p.stderr, r"^polybus run: the program returned; waiting for its threads still "
                        r"running \(late\); Ctrl-C or SIGTERM ends the run$", timeout=60)
    Path(f"{said}.go").touch()
    out, _ = finish(p, 30)
    assert p.returncode == 0
    assert out.strip() == "returned"
    assert said.read_text() == (
        "UsageError: a use()d interface was called outside a polybus run: the last run in "
        "this process has ended (its entrypoint returned), and a thread of the program "
        "that calls on after that gets this")


def test_sigterm_ends_a_run_whose_thread_never_ends(procs: Procs, tmp_path: Path) -> None:
    _, p = _start(procs, tmp_path, stuck=True)
    assert p.stderr is not None
    read_line(p.stderr, r"waiting for its threads still running \(forever, late\)", timeout=60)
    p.send_signal(signal.SIGTERM)
    read_line(p.stderr, r"^polybus run: terminated$", timeout=20)
    read_line(p.stderr, r"^polybus: 2 thread\(s\) of the program were still running; they "
                        r"end with the process$", timeout=20)
    finish(p, 20)
    assert p.returncode == 128 + signal.SIGTERM
