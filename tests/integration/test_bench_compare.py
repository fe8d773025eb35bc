"""`polybus bench --compare OLD NEW`: the ratios of two runs side by side, from their JSON
files alone (no benchmark runs here)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import main as cli

DASH = "\u2013"


def _doc(bench: str, ratios: list[tuple[str, float]], commit: str = "aaaa1111",
         date: str = "2026-11-29 10:00 UTC", **params: Any) -> dict[str, Any]:
    """A benchmark's JSON as polybus writes one, with these ratios."""
    return {"bench": bench, "polybus_version": "0.1.0",
            "machine": {"cpus": 2, "python": "3.11.7", "platform": "Linux-test",
                        "commit": {"hash": commit, "dirty": False}},
            "params": {"date": date, "x_label": "x", **params},
            "rows": [{"system": "polybus", "config": {}, "x": 0, "metric": "rtt_us",
                      "median": 10.0, "min": 9.0, "max": 11.0, "n": 3}],
            "ratios": [{"name": n, "value": v} for n, v in ratios]}


def _put(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _table(out: str) -> list[list[str]]:
    """The cells of every table row printed (the header's too)."""
    return [[c.strip() for c in line.strip("│┃").split("│" if "│" in line else "┃")]
            for line in out.splitlines() if line[:1] in ("│", "┃")]


OLD = [("d steady", 1.0), ("c doubled", 2.0), ("b halved", 4.0), ("a 10% more", 1.0),
       ("gone", 5.0)]
NEW = [("a 10% more", 1.1), ("b halved", 2.0), ("c doubled", 4.0), ("d steady", 1.0),
       ("fresh", 7.0)]


def test_rows_largest_change_first_then_by_name_then_one_sided(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "a" / "latency.json", _doc("latency", OLD))
    new = _put(tmp_path / "b" / "latency.json",
               _doc("latency", NEW, commit="bbbb2222", date="2026-11-30 09:00 UTC"))
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    # halved and doubled are as large a change (by factor): then by name
    assert _table(out) == [
        ["ratio", "old", "new", "new/old"],
        ["b halved", "4", "2", "0.500"],
        ["c doubled", "2", "4", "2.00"],
        ["a 10% more", "1", "1.1", "1.10"],
        ["d steady", "1", "1", "1.00"],
        ["gone", "5", DASH, "only in old"],
        ["fresh", DASH, "7", "only in new"],
    ]
    # each side's commit, date and machine, above the table, in the page's words
    assert (f"old {old}: commit: aaaa1111; date: 2026-11-29 10:00 UTC; machine: 2 CPUs, "
            "Linux-test; Python 3.11.7") in out
    assert f"new {new}: commit: bbbb2222; date: 2026-11-30 09:00 UTC" in out
    assert out.index(f"old {old}") < out.index("┃ ratio")
    assert "note:" not in out


def test_zero_and_repeated_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """NEW/OLD that cannot be taken (OLD zero) or is negative counts as the largest
    change; zero and zero is none; a name twice in a file is paired by its order."""
    old = _put(tmp_path / "old.json", _doc("ep", [("z", 0.0), ("zz", 0.0), ("r", 1.0),
                                                  ("r", 2.0), ("neg", 1.0)]))
    new = _put(tmp_path / "new.json", _doc("ep", [("r", 1.0), ("r", 3.0), ("zz", 0.0),
                                                  ("neg", -1.0), ("z", 2.0)]))
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    assert _table(capsys.readouterr().out)[1:] == [
        ["neg", "1", "-1", "-1.00"], ["z", "0", "2", DASH], ["r (#2)", "2", "3", "1.50"],
        ["r", "1", "1", "1.00"], ["zz", "0", "0", DASH]]


def test_a_folder_against_a_file_and_benchmarks_of_one_side(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "results"
    for bench in ("latency", "sort", "dna"):
        _put(old / f"{bench}.json", _doc(bench, [("x", 1.0)]))
    _put(old / "sweep.json", {"sweep": "app.toml", "cells": []})
    new = _put(tmp_path / "sort-new.json", _doc("sort", [("x", 3.0)]))
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    got = capsys.readouterr()
    assert _table(got.out) == [["ratio", "old", "new", "new/old"], ["x", "1", "3", "3.00"]]
    assert "─ sort ─" in got.out and "─ latency ─" not in got.out
    # in the registry's order, as the page has them
    assert f"only in old ({old}), not compared: latency, dna" in got.out
    assert f"{old}/sweep.json: not a benchmark's JSON" in got.err
    assert "left out of the comparison" in got.err


def test_two_files_of_one_benchmark_pair_by_file_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    _put(old / "sort.json", _doc("sort", [("x", 1.0)]))
    _put(old / "sort-quick.json", _doc("sort", [("x", 2.0)], quick=True))
    _put(new / "sort.json", _doc("sort", [("x", 5.0)]))
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "─ sort (sort.json) ─" in out
    assert _table(out)[1:] == [["x", "1", "5", "5.00"]]
    assert f"only in old ({old}), not compared: sort (sort-quick.json)" in out


@pytest.mark.parametrize(("old_quick", "new_quick", "said"), [
    (False, True, "note: new is a --quick run (not figures of record), old a full one"),
    (True, False, "note: old is a --quick run (not figures of record), new a full one"),
    (True, True, None),
])
def test_a_quick_run_against_a_full_one_is_allowed_and_said(
        old_quick: bool, new_quick: bool, said: str | None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    quick = [{"quick": True} if q else {} for q in (old_quick, new_quick)]
    old = _put(tmp_path / "o.json", _doc("rudy", [("x", 1.0)], **quick[0]))
    new = _put(tmp_path / "n.json", _doc("rudy", [("x", 1.0)], **quick[1]))
    out_json = tmp_path / "cmp.json"
    assert cli(["bench", "--compare", str(old), str(new), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    if said is None:
        assert "note:" not in out
    else:
        assert said in out
        assert out.index(said) < out.index("┃ ratio")
    doc = json.loads(out_json.read_text())["benchmarks"][0]
    assert (doc["old"]["quick"], doc["new"]["quick"]) == (old_quick, new_quick)
    assert bool(doc["notes"]) == (said is not None)


def test_an_interrupted_side_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "o.json", _doc("sort", [("x", 1.0)]))
    new = _put(tmp_path / "n.json", {**_doc("sort", [("x", 2.0)]), "complete": False})
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    assert "note: new was interrupted (Ctrl-C)" in capsys.readouterr().out


def test_the_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "a" / "latency.json", _doc("latency", OLD))
    _put(tmp_path / "a" / "dna.json", _doc("dna", [("x", 1.0)]))
    new = _put(tmp_path / "b" / "latency.json", _doc("latency", NEW, commit="bbbb2222"))
    assert cli(["bench", "--compare", str(old.parent), str(new.parent), "--json", "-"]) == 0
    got = capsys.readouterr()
    doc = json.loads(got.out)  # (standard output is the JSON alone; the tables on stderr)
    assert "┃ ratio" in got.err
    assert doc["old"] == str(old.parent) and doc["new"] == str(new.parent)
    assert (doc["only_old"], doc["only_new"]) == (["dna"], [])
    [bench] = doc["benchmarks"]
    assert bench["bench"] == "latency"
    assert bench["old"]["file"] == str(old) and bench["new"]["file"] == str(new)
    assert bench["new"]["machine"]["commit"] == {"hash": "bbbb2222", "dirty": False}
    assert bench["old"]["date"] == "2026-11-29 10:00 UTC"
    assert bench["old"]["complete"] is True
    assert [r["name"] for r in bench["ratios"]] == ["b halved", "c doubled", "a 10% more",
                                                    "d steady"]
    assert bench["ratios"][1] == {"name": "c doubled", "old": 2.0, "new": 4.0,
                                  "new_over_old": 2.0}
    assert math.isclose(bench["ratios"][2]["new_over_old"], 1.1)
    assert bench["only_old"] == [{"name": "gone", "value": 5.0}]
    assert bench["only_new"] == [{"name": "fresh", "value": 7.0}]
    assert bench["notes"] == []


def test_new_left_out_is_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "old" / "ep.json", _doc("ep", [("x", 1.0)]))
    monkeypatch.chdir(tmp_path)
    assert cli(["bench", "--compare", str(old)]) == 2
    assert capsys.readouterr().err == (
        f"polybus bench: error: --compare {old}: NEW left out means results/ (the figures "
        "of record), and there is no such folder here; name NEW\n")
    _put(tmp_path / "results" / "ep.json", _doc("ep", [("x", 4.0)]))
    assert cli(["bench", "--compare", str(old)]) == 0
    out = capsys.readouterr().out
    assert _table(out)[1:] == [["x", "1", "4", "4.00"]]
    assert "new results/ep.json: " in out


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of a command that must exit 2, having printed no table."""
    assert cli(["bench", *argv]) == 2
    got = capsys.readouterr()
    assert "┃" not in got.out + got.err
    assert got.err.endswith("\n") and "Traceback" not in got.err
    return got.err.splitlines()[-1].removeprefix("polybus bench: error: ")


def test_errors_say_what_and_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _put(tmp_path / "good.json", _doc("sort", [("x", 1.0)]))
    other = _put(tmp_path / "dna.json", _doc("dna", [("x", 1.0)]))
    broken = tmp_path / "broken.json"
    broken.write_text('{"bench": ')
    sweep = _put(tmp_path / "sweep.json", {"sweep": "app.toml", "cells": []})
    rowless = _put(tmp_path / "rowless.json", {"bench": "sort"})
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    odd = _put(tmp_path / "odd.json", {**_doc("sort", []), "ratios": [{"name": "x",
                                                                        "value": "fast"}]})
    empty, sweeps = tmp_path / "empty", tmp_path / "sweeps"
    empty.mkdir()
    _put(sweeps / "s.json", {"sweep": "app.toml", "cells": []})
    (empty / "notes.txt").write_text("not JSON")
    missing = tmp_path / "nothere"
    cases = {
        (str(broken), str(good)): f"{broken}: not JSON (Expecting value: line 1 column 11); "
                                  "fix or remove it",
        (str(good), str(odd)): f"{odd}: a benchmark's JSON not as polybus writes one "
                               "(ratios[0].value is not a number: 'fast'); fix or remove it",
        (str(good), str(sweep)): f"--compare NEW {sweep}: not a benchmark's JSON (it has no "
                                 '"bench" and "rows")',
        (str(rowless), str(good)): f"--compare OLD {rowless}: not a benchmark's JSON (it has "
                                   'no "rows")',
        (str(good), str(listed)): f"--compare NEW {listed}: not a benchmark's JSON (it is a "
                                  "list, not an object)",
        (str(empty), str(good)): f"--compare OLD {empty}: no JSON file in this folder "
                                 f"(NAME.json, as `polybus bench NAME --out {empty}` writes)",
        (str(good), str(sweeps)): f"--compare NEW {sweeps}: no benchmark's JSON in this "
                                  "folder (only JSON of another kind)",
        (str(missing), str(good)): f"--compare OLD {missing}: no such file or folder",
        (str(good), str(other)): f"--compare: OLD {good} (sort) and NEW {other} (dna) have "
                                 "no benchmark in common; nothing to compare",
    }
    for argv, said in cases.items():
        assert _error(["--compare", *argv], capsys) == said, argv
    # (argparse gives --compare every word after it: a benchmark's name too)
    assert _error(["--compare", str(good), str(good), "sort"], capsys) == (
        f"--compare takes OLD and NEW (NEW left out: results/), and runs nothing; 3 were "
        f"given: {good} {good} sort")


@pytest.mark.parametrize("extra", [["sort"], ["--quick"], ["--out", "x"], ["--page-only"],
                                   ["--plot", "x.png"], ["--list"]])
def test_options_that_run_or_write_benchmarks_are_refused(
        extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _put(tmp_path / "good.json", _doc("sort", [("x", 1.0)]))
    said = _error([*extra, "--compare", str(good), str(good)], capsys)
    what = repr(extra[0]) if extra == ["sort"] else extra[0]
    assert said == ("--compare runs nothing and compares two runs' JSON files; leave out "
                    f"{what}")
    assert not (tmp_path / "x").exists()


def test_json_is_never_one_of_the_files_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "old" / "sort.json", _doc("sort", [("x", 1.0)]))
    new = _put(tmp_path / "new.json", _doc("sort", [("x", 2.0)]))
    before = old.read_bytes()
    assert _error(["--compare", str(old.parent), str(new), "--json", str(old)], capsys) == (
        f"--json {old}: is a file --compare reads, which it would replace; name another file")
    assert old.read_bytes() == before
    assert _error(["--compare", str(old), str(new), "--json", str(tmp_path / "no" / "c.json")],
                  capsys) == f"--json {tmp_path}/no/c.json: directory {tmp_path}/no does not exist"


def test_names_are_printed_as_they_are_not_as_markup(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _put(tmp_path / "[b]o.json", _doc("x[b]y", [("r[i]", 1.0)]))
    new = _put(tmp_path / "n.json", _doc("x[b]y", [("r[i]", 2.0)]))
    assert cli(["bench", "--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "─ x[b]y ─" in out and f"old {old}: " in out
    assert _table(out)[1:] == [["r[i]", "1", "2", "2.00"]]
