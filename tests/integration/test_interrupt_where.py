"""A run stopped by Ctrl-C or SIGTERM says where its program was and what it waited for.

From a new-user trial: a run that hung said only `polybus run: interrupted`, and its
--json `{"type": "KeyboardInterrupt", "message": ""}`: nothing to go on."""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest

from integration.conftest import Procs, read_line
from polybus.testing.apps import waiting_client

SERVER = """
import threading


def slow(x):
    threading.Event().wait(60)  # (answered only if nobody stops the run first)
    return x
"""

CLIENT = waiting_client("slow")
WAIT_LINE = textwrap.dedent(CLIENT).splitlines().index("    return wait(p)") + 1

TOML = """
[modules.s]
source = "s.py"

[modules.c]
source = "c.py"
entrypoint = "main"
use.slow = { callstyle = "async" }

[bind]
"c.slow" = "s.slow"
"""


@pytest.mark.parametrize(("sig", "said", "code"), [(signal.SIGINT, "interrupted", 130),
                                                   (signal.SIGTERM, "terminated", 143)])
def test_a_stopped_run_says_the_line_and_the_call_its_program_waited_for(
        procs: Procs, tmp_path: Path, sig: signal.Signals, said: str, code: int) -> None:
    (tmp_path / "s.py").write_text(textwrap.dedent(SERVER))
    (tmp_path / "c.py").write_text(textwrap.dedent(CLIENT))
    (tmp_path / "app.toml").write_text(TOML)
    out = tmp_path / "out.json"
    p = procs.start("run", tmp_path / "app.toml", "--no-worker-output", "--json", out)
    assert p.stdout is not None
    read_line(p.stdout, "waiting", timeout=60)
    p.send_signal(sig)  # (the run this test started)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    where = (f"while the program was at {tmp_path / 'c.py'}, line {WAIT_LINE}, in main; it was "
             "waiting for a call to slow on s-0, not yet answered")
    assert f"polybus run: {said} {where}" in err
    assert json.loads(out.read_text())["error"]["message"] == where
