"""`polybus check` stopped by Ctrl-C while a module's import hangs says which module and
the line it was at, as an import that never ends says them after the time limit.

From a new-user trial: a `time.sleep(100)` at a module's top and Ctrl-C gave only
`polybus check: interrupted`."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from integration.conftest import Procs, read_line, rest_of
from polybus.testing.apps import write_one_call_app

SERVER = "import time\n\ntime.sleep(100)\n\n\ndef f(x):\n    return x\n"
CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main():\n    return f(3)\n"


@pytest.mark.parametrize("whole_group", [True, False], ids=["ctrl-c", "kill-int"])
def test_check_interrupted_during_a_hung_import_says_the_module_and_line(
        procs: Procs, tmp_path: Path, whole_group: bool) -> None:
    # Ctrl-C at a terminal reaches the import's child process too; `kill -INT` only check
    write_one_call_app(tmp_path, server_keys="replication = 1", server=SERVER,
                       client=CLIENT)
    p = procs.start("check", "app.toml", cwd=tmp_path, group=True)
    assert p.stderr is not None
    read_line(p.stderr, r"importing module 'server' \(server.py\) is taking more", timeout=60)
    if whole_group:
        os.killpg(p.pid, signal.SIGINT)  # (the group this test started, check and its child)
    else:
        p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 130
    err = rest_of(p.stderr)
    assert ("polybus check: interrupted while importing module 'server' (server.py); "
            "it was at line 3") in err, err
    assert "Traceback" not in err, err
