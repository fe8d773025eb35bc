"""A second Ctrl-C (or SIGTERM) that comes while `polybus` says how the first stopped it,
or as the interpreter shuts down, ends the process with the first one's status (130,
143), not by a KeyboardInterrupt outside main() (the process then died of SIGINT, -2;
seen under load in test_signals' double Ctrl-C)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

_SCRIPT = textwrap.dedent("""
    import os, signal, subprocess, sys, types
    import polybus.cli.main as m

    first, pelt = getattr(signal, sys.argv[1]), sys.argv[2] == "pelt"
    PELT = ("import os, signal, sys, time\\n"
            "end = time.monotonic() + 10\\n"
            "while time.monotonic() < end:\\n"
            "    try: os.kill(int(sys.argv[1]), signal.SIGINT)\\n"
            "    except ProcessLookupError: break\\n"
            "    time.sleep(0.0005)\\n")

    def command(args):
        os.kill(os.getpid(), first)  # the first stop signal, while the command runs
        signal.pause()

    said = m.end_now

    def end_now(*a, **k):  # the second one comes as the stop is said; or, pelted, SIGINT
        if pelt:  # after SIGINT from then to the process's end (not holding our pipes)
            subprocess.Popen([sys.executable, "-c", PELT, str(os.getpid())],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:
            os.kill(os.getpid(), signal.SIGINT)
        said(*a, **k)

    m.end_now = end_now
    m.parse = lambda argv: types.SimpleNamespace(
        command="run", _module=types.SimpleNamespace(main=command))
    raise SystemExit(m.main())
""")


@pytest.mark.parametrize(("first", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_second_signal_while_the_stop_is_said_keeps_the_status(first: str,
                                                                  status: int) -> None:
    p = subprocess.run([sys.executable, "-c", _SCRIPT, first, "once"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == status, p.stderr
    assert p.returncode != -signal.SIGINT


@pytest.mark.parametrize(("first", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_signals_until_the_process_is_gone_keep_the_status(first: str, status: int) -> None:
    """Python puts its handlers back to the system's default as the interpreter shuts
    down: a SIGINT then (Ctrl-C held down, a supervisor repeating its signal) killed the
    process by SIGINT, -2, after "interrupted" was said (15 runs of 15 so by hand)."""
    p = subprocess.run([sys.executable, "-c", _SCRIPT, first, "pelt"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == status, p.stderr


_SWAP = textwrap.dedent("""
    import os, signal, sys, types
    import polybus.cli.main as m

    first, second = getattr(signal, sys.argv[1]), getattr(signal, sys.argv[2])

    def command(args):
        os.kill(os.getpid(), first)  # the first stop signal, while the command runs
        signal.pause()

    real, sent = signal.signal, []

    def swapping(sig, handler):  # the second comes as the stop's handlers are put in
        if getattr(handler, "__name__", "") == "now" and sig == signal.SIGTERM and not sent:
            sent.append(second)  # (once: before the kill, whose handler may raise)
            os.kill(os.getpid(), second)
        return real(sig, handler)

    signal.signal = swapping
    m.parse = lambda argv: types.SimpleNamespace(
        command="run", _module=types.SimpleNamespace(main=command))
    raise SystemExit(m.main())
""")


@pytest.mark.parametrize(("first", "second", "status"), [
    ("SIGTERM", "SIGTERM", 143), ("SIGINT", "SIGTERM", 130), ("SIGTERM", "SIGINT", 143)])
def test_a_second_signal_while_the_stop_handlers_are_put_in_keeps_the_status(
        first: str, second: str, status: int) -> None:
    """A second SIGTERM that came between the first one's Terminated and the stop's own
    handlers (`_ending`: SIGINT's put in, SIGTERM's not yet) met the first handler, which
    raised Terminated again, out of main(): a traceback and status 1. Seen under `polybus
    serve` stopping, in a worker it had started again and that was still importing its
    module: its restarter's thread ended (PR_SET_PDEATHSIG) and the engine sent its own
    SIGTERM, together."""
    p = subprocess.run([sys.executable, "-c", _SWAP, first, second], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == status, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
