"""`polybus sweep` end to end on real local workers: overrides reach each run, a combination
that fails at run time is reported in its cell and the others still run, files are
written; a bad configuration value stops the sweep before anything runs."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from polybus.cli.main import main as cli
from polybus.testing.apps import write_app

SERVER = "def square(x):\n    return x * x\n"
CLIENT = """from polybus import use

square = use("square")


def main(n):
    return sum(int(square(i)) for i in range(n))
"""
TOML = """[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
args = [5]
use.square = { callstyle = "sync" }

[bind]
"client.square" = "server.square"
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)


@pytest.mark.slow
def test_sweep_runs_combinations_and_keeps_going_after_a_failure(app: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]
                                                                 ) -> None:
    js, cs, png = tmp_path / "s.json", tmp_path / "s.csv", tmp_path / "s.png"
    # args = ["x"] is a valid configuration whose run fails (range("x") in the client)
    rc = cli(["sweep", str(app), "--vary", "modules.server.replication=1,2",
              "--vary", 'modules.client.args=[20],["x"]',
              "--set", "modules.client.use.square.callstyle=async", "--repeat", "1",
              "--baseline", "replication=1", "--json", str(js), "--csv", str(cs),
              "--plot", str(png)])
    assert rc == 1  # a combination failed; the table and files are written all the same
    d = json.loads(js.read_text())
    assert len(d["cells"]) == 4 and d["set"] == ["modules.client.use.square.callstyle=async"]
    bad = [c for c in d["cells"] if c["error"]]
    assert [c["config"]["modules.client.args"] for c in bad] == [["x"], ["x"]]  # (typed)
    assert all("TypeError" in c["error"] for c in bad)
    good = [c for c in d["cells"] if not c["error"]]
    assert len(good) == 2 and all(c["median"] > 0 and c["speedup"] > 0 for c in good)
    rows = list(csv.DictReader(cs.read_text().splitlines()))
    assert len(rows) == 4 and png.stat().st_size > 0
    out = capsys.readouterr().out
    assert "failed" in out and "speedup" in out


def test_sweep_rejects_a_bad_vary_value_before_running(app: Path, tmp_path: Path) -> None:
    js = tmp_path / "s.json"
    assert cli(["sweep", str(app), "--vary", "modules.server.replication=1,2",
                "--vary", "modules.client.use.square.callstyle=sync,nonsense",
                "--json", str(js)]) == 2
    assert not js.exists()


def test_sweep_rejects_a_broken_file_before_running(app: Path) -> None:
    app.write_text(TOML.replace("entrypoint", "entrypiont"))
    assert cli(["sweep", str(app), "--vary", "modules.server.replication=1"]) == 2


def test_sweep_plot_without_matplotlib_fails_before_any_run(
        app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--plot without the plot extra: said at once, not after every combination ran
    (it was a raw ModuleNotFoundError traceback then, exit status 1)."""
    from polybus.cli import cmd_sweep

    runs: list[tuple[str, tuple[str, ...]]] = []
    monkeypatch.setattr(cmd_sweep, "_runner",
                        lambda path, sets: runs.append((path, tuple(sets))) or 1.0)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    png = tmp_path / "s.png"
    assert cli(["sweep", str(app), "--vary", "modules.server.replication=1,2",
                "--repeat", "1", "--plot", str(png)]) == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "pip install 'polybus[plot]'" in err
    assert "Traceback" not in err
    assert runs == [] and not png.exists()


def test_a_cell_whose_client_raised_keeps_its_traceback(app: Path, tmp_path: Path) -> None:
    """The client program's own exception: the cell's text says what, then the traceback
    from the entrypoint down, as `run` prints it (before, only "TypeError: ..."); the
    table shows the first line."""
    js = tmp_path / "s.json"
    rc = cli(["sweep", str(app), "--vary", 'modules.client.args=[3],["x"]', "--json", str(js)])
    assert rc == 1
    bad = [c for c in json.loads(js.read_text())["cells"] if c["error"]]
    assert len(bad) == 1
    first, _, rest = bad[0]["error"].partition("\n")
    assert first.startswith("TypeError: ")
    assert "Traceback (most recent call last):" in rest
    assert "client.py" in rest and "in main" in rest and "range(n)" in rest
    assert "polybus/runner.py" not in rest  # polybus's own frames are left out, as in run


def test_a_cells_traceback_names_the_programs_own_exception_as_run_does(tmp_path: Path) -> None:
    client = CLIENT.replace("def main(n):", "class InputError(Exception):\n    pass\n\n\n"
                            "def main(n):\n    if n < 0:\n        raise InputError(n)")
    app = write_app(tmp_path, server=SERVER, client=client, toml=TOML)
    js = tmp_path / "s.json"
    rc = cli(["sweep", str(app), "--vary", "modules.client.args=[3],[-1]", "--json", str(js)])
    assert rc == 1
    bad = [c["error"] for c in json.loads(js.read_text())["cells"] if c["error"]]
    assert len(bad) == 1 and bad[0].rstrip().endswith("\nclient.InputError: -1"), bad
    assert "polybus_user" not in bad[0]


BIG_SERVER = "def first(b, i):\n    return float(b[0]) + i\n"
BIG_CLIENT = """import numpy as np
from polybus import use

first = use("first")


def main(n):
    b = np.ones(50_000)  # 400 kB
    return sum(first(b, i) for i in range(n))
"""
BIG_TOML = """[modules.server]
source = "server.py"
define.first = { cache = [] }

[modules.client]
source = "client.py"
entrypoint = "main"
args = [6]
use.first = { callstyle = "sync" }

[bind]
"client.first" = "server.first"
"""


def test_sweep_records_the_bytes_each_run_sent(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Caching a large operand shows as bytes in the table, --json and --csv: sent
    once, not once a call."""
    app = write_app(tmp_path, server=BIG_SERVER, client=BIG_CLIENT, toml=BIG_TOML)
    js, cs = tmp_path / "s.json", tmp_path / "s.csv"
    rc = cli(["sweep", str(app), "--vary", 'modules.server.define.first.cache=[],["b"]',
              "--repeat", "1", "--json", str(js), "--csv", str(cs)])
    assert rc == 0
    cells = {json.dumps(c["config"]["modules.server.define.first.cache"]): c
             for c in json.loads(js.read_text())["cells"]}  # (typed: [] and ["b"])
    plain, cached = cells["[]"], cells['["b"]']
    assert len(plain["bytes_sent"]) == len(cached["bytes_sent"]) == 1
    assert plain["bytes_sent_median"] > 6 * 400_000  # the array went with every call
    assert 400_000 < cached["bytes_sent_median"] < 2 * 400_000  # once, then its name
    assert plain["bytes_received_median"] > 0
    rows = {r["modules.server.define.first.cache"]: r
            for r in csv.DictReader(cs.read_text().splitlines())}
    assert int(rows['["b"]']["bytes_sent"]) == cached["bytes_sent_median"]
    out = capsys.readouterr().out
    assert "sent" in out and "received" in out and "MB" in out


@pytest.mark.parametrize("quiet", [False, True])
def test_quiet_leaves_out_the_progress_and_keeps_the_table(
        app: Path, capsys: pytest.CaptureFixture[str], quiet: bool) -> None:
    # (a new user's `sweep --quiet`, as `run --quiet`, was "unrecognized arguments")
    rc = cli(["sweep", str(app), "--vary", "modules.server.replication=1,2", "--repeat", "1",
              *(["--quiet"] if quiet else [])])
    assert rc == 0
    got = capsys.readouterr()
    assert "speedup" in got.out  # the table either way
    progress = [ln for ln in got.err.splitlines() if ln.startswith("sweep: ")]
    assert (progress == []) if quiet else len(progress) == 2, got.err
