"""`polybus sweep` on real local workers keeps a digest of each run's result and says
whether every strategy gave the same: the same result gives one digest and no warning;
a result that depends on a strategy (here the call style the client saw) is a warning
naming the combinations, exit status 3; a result that differs run to run (a time) is
said to be not deterministic and compared with nothing."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from polybus.cli.main import main as cli
from polybus.testing.apps import write_app

from .test_sweep_cli import SERVER, TOML  # (the same small app: square over a sync call)

SAME = """from polybus import use

square = use("square")


def main(n):
    return {"total": sum(int(square(i)) for i in range(n)), "n": n}
"""
# The program looks at what its call gave back: a value (sync) or a promise (async).
SEES_STYLE = """from polybus import use

square = use("square")


def main(n):
    r = square(n)
    return [type(r).__name__, int(r)]
"""
TIMED = """import time

from polybus import use

square = use("square")


def main(n):
    return [int(square(n)), time.time()]
"""
CALLSTYLE = "modules.client.use.square.callstyle=sync,async"


def _sweep(tmp_path: Path, client: str, *more: str) -> tuple[int, dict[str, object], str]:
    app = write_app(tmp_path, server=SERVER, client=client, toml=TOML)
    js = tmp_path / "s.json"
    rc = cli(["sweep", str(app), "--vary", CALLSTYLE, "--repeat", "2", "--quiet",
              "--json", str(js), *more])
    return rc, json.loads(js.read_text()), str(tmp_path / "s.csv")


def test_the_same_result_under_every_strategy_is_said_with_no_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, d, cs = _sweep(tmp_path, SAME, "--csv", str(tmp_path / "s.csv"))
    out = capsys.readouterr().out
    assert rc == 0
    cells = d["cells"]
    assert isinstance(cells, list) and len(cells) == 2
    digests = [x for c in cells for x in c["digests"]]
    assert len(digests) == 4 and len(set(digests)) == 1 and len(digests[0]) == 16
    assert d["results_differ"] is False
    assert f"results: the same in every combination (digest {digests[0]})" in out
    assert "warning" not in out
    rows = list(csv.DictReader(Path(cs).read_text().splitlines()))
    assert [r["digests"] for r in rows] == [f"{digests[0]} {digests[0]}"] * 2


def test_a_strategy_that_changes_the_result_is_a_warning_naming_the_combinations(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, d, _ = _sweep(tmp_path, SEES_STYLE)
    out = capsys.readouterr().out
    assert rc == 3  # (a warning: every run succeeded)
    cells = d["cells"]
    assert isinstance(cells, list)
    sync, async_ = (c["digests"] for c in cells)
    assert len(set(sync)) == 1 and len(set(async_)) == 1 and sync[0] != async_[0]
    assert d["results_differ"] is True
    assert "polybus sweep: warning: a strategy changed the program's result" in out
    assert f"callstyle=sync: {sync[0]}" in out and f"callstyle=async: {async_[0]}" in out
    assert "results: the same" not in out


def test_a_result_that_differs_run_to_run_is_not_deterministic_and_not_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, d, _ = _sweep(tmp_path, TIMED)
    out = capsys.readouterr().out
    assert rc == 0 and d["results_differ"] is False
    assert "warning" not in out
    said = [line for line in out.splitlines() if "not deterministic" in line]
    assert len(said) == 1  # (one line, both combinations named in it)
    assert "callstyle=sync" in said[0] and "callstyle=async" in said[0]
    assert "not compared" in said[0]


def test_a_varied_argument_changes_the_result_without_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """args is what the program computes on, not a strategy: each args' results are
    compared across the call styles alone."""
    rc, d, _ = _sweep(tmp_path, SAME, "--vary", "modules.client.args=[3],[4]")
    out = capsys.readouterr().out
    assert rc == 0 and d["results_differ"] is False
    cells = d["cells"]
    assert isinstance(cells, list) and len(cells) == 4
    by_args: dict[str, set[str]] = {}
    for c in cells:
        by_args.setdefault(str(c["config"]["modules.client.args"]), set()).update(c["digests"])
    assert [len(v) for v in by_args.values()] == [1, 1] and len(set.union(*by_args.values())) == 2
    assert "results: the same across callstyle at each args" in out and "warning" not in out


def test_the_warning_names_the_key_that_made_the_difference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The result depends on the call style alone: whatever the replica count, sync gives
    one result and async another, and the warning says so."""
    rc, d, _ = _sweep(tmp_path, SEES_STYLE, "--vary", "modules.server.replication=1,2")
    out = capsys.readouterr().out
    assert rc == 3 and d["results_differ"] is True
    assert ("  what made the difference: modules.client.use.square.callstyle=sync gives a "
            "different result from async, whatever the other varied keys") in out.splitlines()
    assert d["results_differ_by"] == [
        {"at": {}, "keys": {"modules.client.use.square.callstyle": [["sync"], ["async"]]}}]
