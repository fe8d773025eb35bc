"""The program uses a forwarded producer's promise after the replica keeping its value
died: an idempotent producer runs again on the replica left, and the program gets its
value.

``q = use(first(x))`` on 2 replicas: ``first``'s large answer is forwarded to ``use``
and kept on its replica (a ``Ref`` at the client); ``use`` answers; the test SIGKILLs
the replica that ran ``first``; the program then reads ``first``'s value. It raised
``WorkerDiedError: the result of this call to first was forwarded and its replica (s-0)
is gone``, though ``first`` is idempotent and a replica was left to run it (seen by
tests/integration/chaosmix.py: the mix program reads the even producers' arrays).
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


def first(x, go, started):
    with open(started, "a") as out:
        out.write(f"{os.getpid()}\\n")
    end = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < end:
        time.sleep(0.001)
    return x * 2


def use(a):
    return float(a[::7].sum())
"""

CLIENT = """
import time
from pathlib import Path

import numpy as np

import polybus
from polybus import use

first = use("first")
total = use("use")


def main(d):
    x = np.arange(32768.0)  # 256 KiB: forwarded, kept on first's replica
    p = first(x, d + "/go", d + "/started")
    q = total(p)
    Path(d, "go").touch()
    a = polybus.wait(q)  # (use has its answer: first's value is needed by no consumer)
    Path(d, "used").touch()
    end = time.monotonic() + 30
    while not Path(d, "killed").exists() and time.monotonic() < end:
        time.sleep(0.001)
    return f"{a} {float(np.asarray(p).sum())}"
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
use.use = {{ callstyle = "async" }}

[bind]
"c.first" = "s.first"
"c.use" = "s.use"
"""


def wait_for(path: Path, within: float = 60.0, line: bool = False) -> None:
    """Until ``path`` exists, and with ``line`` holds a whole line (a file the server
    opens, then writes: seen empty between the two under load)."""
    deadline = time.monotonic() + within
    while not path.exists() or (line and not path.read_text().endswith("\n")):
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.01)


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_forwarded_value_lost_with_its_replica_is_made_again_for_the_program(
        procs: Procs, tmp_path: Path, idempotent: bool) -> None:
    (tmp_path / "s.py").write_text(textwrap.dedent(SERVER))
    (tmp_path / "c.py").write_text(textwrap.dedent(CLIENT))
    define = "" if idempotent else (
        "define.first = { idempotent = false }\ndefine.use = {}")
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(d=tmp_path, define=define))
    p = procs.start("run", app, "--no-worker-output", cwd=tmp_path)
    wait_for(tmp_path / "started", line=True)
    pid = int((tmp_path / "started").read_text().split()[0])
    assert pid in descendants(p.pid), pid
    wait_for(tmp_path / "used")
    os.kill(pid, signal.SIGKILL)
    (tmp_path / "killed").touch()
    out, err = finish(p, 60)
    x = np.arange(32768.0) * 2
    if idempotent:  # first runs again on the replica left: the program has its value
        assert p.returncode == 0, err
        assert out.split() == [str(float(x[::7].sum())), str(float(x.sum()))], (out, err)
    else:  # first may not run again: the program's use of it raises, naming it
        assert p.returncode != 0, (out, err)
        assert "WorkerDiedError" in err and "first" in err and "not idempotent" in err, err
