"""A worker's forked child that gets SIGTERM must not stop the worker.

StopSignals' handler is inherited across fork, and so is its pipe: a child forked by a
served function (multiprocessing's default "fork" context, then terminate()) that gets
SIGTERM writes into the pipe the worker's main thread selects on. The worker's
``stop.wait()`` then returns (False: no signal came to the worker) and it shuts down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from integration.conftest import Procs, read_line
from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.config import load
from polybus.registry.service import RegistryService
from polybus.token import ENV, make_token

SERVER = """
    import multiprocessing, time

    def fork_and_terminate():
        p = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
        p.start()
        time.sleep(0.2)
        p.terminate()
        p.join(10)
        return p.exitcode  # (-SIGTERM: the worker's stop handler is not the child's)

    def ping():
        return "pong"
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "tcp"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.fork_and_terminate = { callstyle = "sync" }
    use.ping = { callstyle = "sync" }

    [bind]
    "client.fork_and_terminate" = "server.fork_and_terminate"
    "client.ping" = "server.ping"
"""


def test_a_forked_child_that_gets_sigterm_does_not_stop_the_worker(tmp_path: Path,
                                                                     procs: Procs) -> None:
    (tmp_path / "server.py").write_text(textwrap.dedent(SERVER))
    (tmp_path / "client.py").write_text("def main():\n    pass\n")
    app = tmp_path / "app.toml"
    app.write_text(textwrap.dedent(TOML))
    token = make_token()
    with RegistryService(token, "tcp://127.0.0.1:0") as reg:
        addr = f"{reg.address.host}:{reg.address.port}"
        w = procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                        "--name", "server-0", env={ENV: token.decode()})
        assert w.stderr is not None
        read_line(w.stderr, "serving")
        s = Session(load(app), addr, token)
        try:
            assert wait(s.call("fork_and_terminate", (), {})) == -signal.SIGTERM
            time.sleep(1.0)
            assert w.poll() is None, "the worker stopped: its forked child's SIGTERM woke it"
            assert wait(s.call("ping", (), {})) == "pong"
        finally:
            s.close()


LOOP = textwrap.dedent("""
    import os, signal, time
    from polybus.stopsignals import StopSignals
    stop = StopSignals((signal.SIGTERM,))
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGTERM)  # the child's inherited handler runs
        os._exit(0)
    os.waitpid(pid, 0)
    t = time.monotonic()
    woke = stop.wait(1.0)
    print(woke, stop.signum, time.monotonic() - t >= 0.9, flush=True)
""")


def test_a_forked_childs_signal_does_not_end_the_parents_wait() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", LOOP], capture_output=True, text=True,
                         timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    # The parent got no signal: its wait must run its full timeout and say False.
    assert out.stdout == "False None True\n"


def test_wait_without_timeout_ignores_a_forked_childs_signal_until_its_own() -> None:
    """The worker's pattern: ``stop.wait()`` once, then shut down."""
    code = textwrap.dedent("""
        import os, signal, sys
        from polybus.stopsignals import StopSignals
        stop = StopSignals((signal.SIGTERM,))
        pid = os.fork()
        if pid == 0:
            os.kill(os.getpid(), signal.SIGTERM)
            os._exit(0)
        os.waitpid(pid, 0)
        print("ready", flush=True)
        stop.wait()
        print("stopped by", stop.signum, flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        assert out == f"stopped by {int(signal.SIGTERM)}\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_signal_the_kernel_gives_another_thread_still_ends_wait() -> None:
    """A process-directed signal goes to a thread that does not block it, not always the
    main one: its C handler then interrupts no select of the main thread."""
    code = textwrap.dedent("""
        import signal, threading, time
        from polybus.stopsignals import StopSignals
        stop = StopSignals((signal.SIGTERM,))
        t = threading.Thread(target=time.sleep, args=(30,), daemon=True)
        t.start()
        signal.pthread_kill(t.ident, signal.SIGTERM)
        t0 = time.monotonic()
        stop.wait()
        print(stop.signum, time.monotonic() - t0 < 5, flush=True)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=10, env=env)
    except subprocess.TimeoutExpired:  # (run() kills the child)
        raise AssertionError("wait() did not end: the signal went to another thread") from None
    assert out.stdout == f"{int(signal.SIGTERM)} True\n", out.stderr


def test_stop_signals_outside_the_main_thread_leaves_no_descriptor_open() -> None:
    """signal.signal raises ValueError outside the main thread (as it did before
    StopSignals); the pipe made just before must not stay open."""
    import threading

    from polybus.stopsignals import StopSignals

    errors: list[BaseException] = []

    def make() -> None:
        try:
            StopSignals((signal.SIGTERM,))
        except BaseException as e:
            errors.append(e)

    before = set(os.listdir("/proc/self/fd"))
    for _ in range(5):
        t = threading.Thread(target=make)
        t.start()
        t.join()
    assert len(errors) == 5 and all(isinstance(e, ValueError) for e in errors)
    assert set(os.listdir("/proc/self/fd")) - before == set()
