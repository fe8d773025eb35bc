"""The import check's child, stopped by a Ctrl-C, says the line it was at even when a
second SIGINT comes while it says so: a Ctrl-C at a terminal reaches it, and `polybus
check`, stopped by the same Ctrl-C, sends it one more if it has not ended yet. The
second one had cut its answer short ("interrupted while importing module 'server'",
without the line: a full suite's run, loaded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The module's import is stopped by a SIGINT it sends itself (as a Ctrl-C stops it); the
# second SIGINT comes as the child writes its answer (json.dumps).
DRIVER = """\
import json, os, signal, sys
import polybus.usercode as usercode

dumps = json.dumps

def second_ctrl_c(*a, **k):
    os.kill(os.getpid(), signal.SIGINT)
    return dumps(*a, **k)

json.dumps = second_ctrl_c
sys.exit(usercode._child(sys.argv[1:]))
"""


def _stopped(tmp_path: Path, driver: str) -> int:
    """The child run by ``driver`` on a module whose import a Ctrl-C stops (at its line
    2 or, handled late, 3): its answer says that line; its exit status."""
    (tmp_path / "server.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(30)\n\n\n"
        "def f(x):\n    return x\n")
    (tmp_path / "driver.py").write_text(driver)
    p = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "server.py"),
                        "60", "server", "-", "f"], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip(), p.stderr
    answer = json.loads(p.stdout.strip().splitlines()[-1])
    assert answer["error"] is None and answer["stopped_at"] in (2, 3), answer
    return p.returncode


def test_a_second_sigint_while_the_child_answers_leaves_its_answer_whole(tmp_path: Path) -> None:
    assert _stopped(tmp_path, DRIVER) == 130


# The second SIGINT comes just as the import's Ctrl-C handler is put back (the import
# ended by the first): its KeyboardInterrupt replaces the first, whose traceback alone
# holds the module's line.
DRIVER_EARLY = """\
import os, signal, sys
import polybus.usercode as usercode

real = signal.signal
armed = [True]

def hooked(sig, handler):
    old = real(sig, handler)
    if sig == signal.SIGINT and handler is signal.default_int_handler and armed[0]:
        armed[0] = False
        os.kill(os.getpid(), signal.SIGINT)
    return old

signal.signal = hooked
sys.exit(usercode._child(sys.argv[1:]))
"""


def test_a_second_sigint_as_the_import_ends_still_finds_the_line(tmp_path: Path) -> None:
    assert _stopped(tmp_path, DRIVER_EARLY) == 130
