"""`polybus run` of a 3-stage forwarded pipeline whose replica is SIGKILLed mid-run ends,
with the right result.

``last(mid(first(x)))`` on 2 replicas: the test SIGKILLs the worker running ``last``
once it has started (it writes its pid, then waits for a flag file); ``mid`` answered
there before it, its value forwarded to ``last`` and kept on that worker. The run hung:
``last`` ran again on the other replica, and so did ``mid``, whose argument names
``first``'s value, which nothing sent it again (client/fwdlost.py). A user's trial
found it: 6 runs of 6 hung, ``g(f(i))`` recovered. The in-process cases, stage by stage:
test_forward_lost_stages.py.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from .conftest import Procs, descendants, finish

SERVER = """
import os
import time


def _wait(flag):
    end = time.monotonic() + 30
    while not os.path.exists(flag) and time.monotonic() < end:
        time.sleep(0.001)


def first(x, go):
    _wait(go)
    return x * 2


def mid(x, k):
    return x * k


def last(x, hold, started):
    with open(started, "a") as out:
        out.write(f"{os.getpid()}\\n")
    _wait(hold)
    return x + 1
"""

CLIENT = """
from pathlib import Path

import numpy as np

from polybus import use

first = use("first")
mid = use("mid")
last = use("last")


def main(d):
    x = np.arange(32768.0)  # 256 KiB: a replica reads the Forwards sent before it answers
    g = last(mid(first(x, d + "/go"), 3), d + "/hold", d + "/started")
    Path(d, "go").touch()  # (every stage sent: each answers Ref, its value kept there)
    return float(np.asarray(g).sum())
"""

TOML = """
[modules.s]
source = "s.py"
replication = 2
{define}

[modules.c]
source = "c.py"
entrypoint = "main"
args = ["{d}"]
use.first = {{ callstyle = "async" }}
use.mid = {{ callstyle = "async" }}
use.last = {{ callstyle = "async" }}

[bind]
"c.first" = "s.first"
"c.mid" = "s.mid"
"c.last" = "s.last"
"""


def started_pid(run_pid: int, started: Path, within: float = 60.0) -> int:
    """The pid of the worker that started ``last`` first (one of this run's)."""
    deadline = time.monotonic() + within
    while not started.exists() or not started.read_text().endswith("\n"):
        assert time.monotonic() < deadline, "last never started"
        time.sleep(0.01)
    pid = int(started.read_text().split()[0])
    assert pid in descendants(run_pid), pid
    return pid


@pytest.mark.parametrize("first_idempotent", [True, False])
def test_a_sigkilled_replica_holding_a_middle_stage_does_not_hang_the_run(
        procs: Procs, tmp_path: Path, first_idempotent: bool) -> None:
    (tmp_path / "s.py").write_text(textwrap.dedent(SERVER))
    (tmp_path / "c.py").write_text(textwrap.dedent(CLIENT))
    define = "" if first_idempotent else (
        "define.first = { idempotent = false }\ndefine.mid = {}\ndefine.last = {}")
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(d=tmp_path, define=define))
    p = procs.start("run", app, "--no-worker-output", cwd=tmp_path)
    os.kill(started_pid(p.pid, tmp_path / "started"), signal.SIGKILL)
    (tmp_path / "hold").touch()
    out, err = finish(p, 60)
    assert "was lost" in err and "killed by signal 9" in err, err
    x = np.arange(32768.0)
    if first_idempotent:  # first, mid and last run again on the replica left
        assert p.returncode == 0, err
        assert float(out.strip()) == float((x * 6 + 1).sum()), (out, err)
    else:  # first may not run again: mid cannot have its value, and fails, last with it
        assert p.returncode != 0, (out, err)
        # (first's answer, a name for its value kept on that worker, is read by the
        # client before the kill, or not yet under load: its value is then gone with its
        # replica, or its call is lost still held there; either way first may not run
        # again, and mid fails on it)
        assert "WorkerDiedError" in err, err
        assert ("the replica holding the result of a call to first is gone" in err
                or "died holding the call first(" in err), err
