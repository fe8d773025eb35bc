"""`polybus sweep --repeat 3` stopped by a real Ctrl-C (SIGINT to its process) once the
second round is done: the title says how many runs each figure is of (two: the third
round's first run is the one interrupted), not the three asked, and the JSON gives each
cell's count."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from integration.conftest import Procs, finish, read_line
from polybus.testing.apps import write_app

SERVER = "def f(x):\n    import time\n    time.sleep(0.3)\n    return x\n"
CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main(x):\n    return f(x)\n"
TOML = """[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
args = [1]

[bind]
"client.f" = "server.f"
"""


@pytest.mark.slow
def test_an_interrupted_sweep_says_how_many_runs_each_cell_has(procs: Procs,
                                                               tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    js = tmp_path / "s.json"
    p = procs.start("sweep", app, "--repeat", "3", "--vary", "modules.client.args=[1],[2]",
                    "--no-worker-output", "--json", js)
    assert p.stderr is not None
    # without a terminal a line per finished run: the fourth ends the second round
    read_line(p.stderr, r"^sweep: 4/6 ", timeout=60)
    p.send_signal(signal.SIGINT)  # (in the third round's first run, which is lost)
    out, _ = finish(p, timeout=60)
    assert p.returncode == 130
    cells = json.loads(js.read_text())["cells"]
    counts = [len(c["elapsed_s"]) for c in cells]
    lo, hi = min(counts), max(counts)
    assert hi < 3
    said = f"{lo} runs (3 asked)" if lo == hi else f"{lo}\u2013{hi} runs (3 asked;"
    title = out.splitlines()[0]
    assert f"median [min\u2013max] of {said}" in title, title
    assert "of 3;" not in title
    assert [c["n"] for c in cells] == counts
