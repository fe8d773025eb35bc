"""worker/main.py serve, started by hand: a stop that lands as the start ends or fails,
in a callback that Python drops (here as the start's last call ends), ends as any stop
does, the start's handlers, hook and repeat all taken off. It came out of serve as a
raised `StartStopped` (said "interrupted", 130, whatever the signal), the unraisable
hook left in and the repeat still signalling: the trace of the frames below the
callback raised it at serve's next line, past its ``try`` or in its ``except``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import os, signal, sys, time
from pathlib import Path
import polybus.worker.main as wm

SIG = signal.SIGUSR2
mode = sys.argv[2]


class Dropped:
    def __del__(self):
        os.kill(os.getpid(), SIG)
        time.sleep(0.05)  # (its handler raises here, in the callback: dropped)


def last(addresses, hint=None):  # (the start's last call: a callback at its last line)
    if mode == "fails":
        try:
            raise ValueError("the start failed")
        finally:
            Dropped()
    Dropped()


wm.check_certificate = last
hook = sys.unraisablehook
try:
    got = wm.serve(registry="tcp://127.0.0.1:9", module_path=Path(sys.argv[1]),
                   name="srv-1", module_key="srv", token=b"t" * 32, signals=(SIG,),
                   banner=False, by_hand=True)
    print("returned", got.signum == SIG)
except BaseException as exc:
    print("raised", type(exc).__name__)
print("hook back", sys.unraisablehook is hook)
print("handler back", signal.getsignal(SIG) == signal.SIG_DFL)
print("repeat over", [t.name for t in __import__("threading").enumerate()
                      if t.name == "polybus-start-stop"] == [])
"""


@pytest.mark.parametrize(("mode", "first", "handler"), [
    ("ends", "returned True", "handler back False"),  # (StopSignals' from then on)
    ("fails", "raised ValueError", "handler back True")])  # (its error said as ever)
def test_a_stop_lost_as_the_start_ends_is_said_as_any_and_leaves_nothing_in(
        tmp_path: Path, mode: str, first: str, handler: str) -> None:
    module = tmp_path / "srv.py"
    module.write_text("def f(x):\n    return x\n")
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(module), mode],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.stdout.splitlines() == [first, "hook back True", handler,
                                       "repeat over True"], out.stderr
