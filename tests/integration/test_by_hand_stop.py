"""`polybus worker` and `polybus registry` started by hand, stopped by a signal, say so
and exit as `run` and `serve` do: "polybus worker: interrupted", 130, for Ctrl-C (SIGINT,
sent here by PID: a process started with & by a non-interactive shell ignores it);
"terminated", 143, for SIGTERM. They exited 0 without a word. A worker the local
engine started (--exit-with-parent) still exits 0, silent: its SIGTERM is a clean end,
which serve's supervisor does not start again (tests/integration/test_serve_restart.py)."""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any

import pytest

from integration.conftest import EXAMPLES, Procs, read_line, rest_of, start_registry

SAID = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}
SIGNALS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])


def _stopped_as_run(p: Any, sig: int, program: str) -> None:
    """``p``, sent ``sig`` already, exits with run's status for it and says only
    "polybus PROGRAM: WORD" on stderr."""
    status, word = SAID[sig]
    assert p.wait(timeout=30) == status
    assert p.stderr is not None
    said = rest_of(p.stderr)
    assert said == f"polybus {program}: {word}\n", said


@SIGNALS
def test_a_registry_stopped_by_a_signal_says_so_and_exits_as_run(procs: Procs, sig: int) -> None:
    env = {"POLYBUS_TOKEN": "stop-registry-token-" + "r" * 20}
    start_registry(procs, env)
    reg = procs.started[-1]
    reg.send_signal(sig)
    _stopped_as_run(reg, sig, "registry")


@SIGNALS
def test_an_idle_worker_stopped_by_a_signal_says_so_and_exits_as_run(procs: Procs,
                                                                    sig: int) -> None:
    env = {"POLYBUS_TOKEN": "stop-worker-token-" + "w" * 20}
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", EXAMPLES / "sort" / "server.py",
                    "--name", "server-0", env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    w.send_signal(sig)
    _stopped_as_run(w, sig, "worker")  # (no call held: no count said)


def test_an_engine_s_worker_stopped_by_sigterm_still_exits_0_unsaid(procs: Procs) -> None:
    """--exit-with-parent: as the local engine starts it. Its SIGTERM (the engine's stop,
    or `kill PID` of one worker under serve) is a clean end: 0, nothing in its log."""
    env = {"POLYBUS_TOKEN": "stop-engine-worker-" + "e" * 20}
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", EXAMPLES / "sort" / "server.py",
                    "--name", "server-0", "--exit-with-parent", "--parent", str(os.getpid()),
                    env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=30) == 0
    said = rest_of(w.stderr)
    assert "polybus worker" not in said, said


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_worker_stopped_during_its_first_registration_ends_at_once_as_a_stop(
        procs: Procs, sig: int) -> None:
    """A registry that takes the connection and never answers (a TLS registry, to a
    worker without TLS): a Ctrl-C in the worker's first registration waited for the
    handshake's 5 s and ended with its error, status 2; it ends there, "interrupted",
    130, as a Ctrl-C at any other time does (143 for SIGTERM)."""
    env = {"POLYBUS_TOKEN": "stop-first-register-" + "f" * 20}
    with socket.socket() as silent:  # (accepts, says nothing: no polybus greeting)
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        silent.settimeout(30)
        host, port = silent.getsockname()
        w = procs.start("worker", "--registry", f"{host}:{port}", "--module",
                        EXAMPLES / "sort" / "server.py", "--name", "server-0", env=env)
        conn, _ = silent.accept()  # (the worker's registration, under way)
        with conn:
            w.send_signal(sig)
            _stopped_as_run(w, sig, "worker")


def test_an_engine_s_worker_stopped_during_its_first_registration_exits_0(
        procs: Procs) -> None:
    """--exit-with-parent: its engine's SIGTERM during the first registration is a clean
    end, as after it: 0, nothing said (not the handshake's error after its timeout)."""
    env = {"POLYBUS_TOKEN": "stop-first-register-" + "e" * 20}
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        silent.settimeout(30)
        host, port = silent.getsockname()
        w = procs.start("worker", "--registry", f"{host}:{port}", "--module",
                        EXAMPLES / "sort" / "server.py", "--name", "server-0",
                        "--exit-with-parent", "--parent", str(os.getpid()), env=env)
        conn, _ = silent.accept()
        with conn:
            w.send_signal(signal.SIGTERM)
            assert w.wait(timeout=30) == 0
    assert w.stderr is not None
    said = rest_of(w.stderr)
    assert "polybus worker" not in said, said


def test_an_engine_s_worker_stopped_while_it_imports_its_module_exits_0(
        procs: Procs, tmp_path: Any) -> None:
    """--exit-with-parent: its engine's SIGTERM while it imports its module (serve
    stopping a worker it had just started again) is a clean end, as later: 0, nothing
    said. It raised Terminated in the import, which said "polybus worker: terminated"
    and exited 143 (a failure, to serve's supervisor), or, landing in a callback of the
    import machinery, was printed as "Exception ignored in ..." and lost."""
    mark = tmp_path / "importing"
    (tmp_path / "slow.py").write_text(f"import pathlib, time\npathlib.Path({str(mark)!r})"
                                      ".touch()\ntime.sleep(60)\n\n\ndef f(x):\n    return x\n")
    env = {"POLYBUS_TOKEN": "stop-importing-worker-" + "i" * 20}
    w = procs.start("worker", "--registry", "127.0.0.1:9", "--module", tmp_path / "slow.py",
                    "--name", "server-0", "--exit-with-parent", "--parent", str(os.getpid()),
                    env=env)
    deadline = time.monotonic() + 30
    while not mark.exists():  # (its module's top-level code runs)
        assert w.poll() is None and time.monotonic() < deadline, rest_of(w.stderr)
        time.sleep(0.02)
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=30) == 0
    assert w.stderr is not None
    said = rest_of(w.stderr)
    assert "polybus worker" not in said and "Traceback" not in said, said
