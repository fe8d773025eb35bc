"""The results page is regenerated from the JSON files alone, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from polybus.bench.report import BenchResult, Row
from polybus.bench.results import TITLE, load_results, render_page, write_page
from polybus.bench.stats import Stat
from polybus.cli.main import main as cli


def _write(directory: Path) -> None:
    lat = BenchResult("latency", {"sizes": [0, 1000], "date": "2026-11-21 10:00 UTC",
                                  "versions": {"polybus": "0.1.0", "numpy": "2.0"}},
                      x_label="payload bytes")
    for size, raw, pb in ((0, 60.0, 70.0), (1000, 62.0, 75.0)):
        lat.add(Row.of("raw_socket", {"transport": "tcp"}, size, "rtt_us", Stat(raw, raw, raw, 3)))
        lat.add(Row.of("polybus", {"transport": "tcp"}, size, "rtt_us", Stat(pb, pb - 1, pb + 1, 3)))
    lat.add_ratio("polybus/raw_socket rtt at 0 B", lat.rows[1], lat.rows[0])
    lat.skipped["mpi4py"] = "not installed (pip install mpi4py)"
    lat.write_json(directory / "latency.json")
    thr = BenchResult("throughput", {"date": "2026-11-21 10:05 UTC"}, x_label="workers")
    thr.add(Row.of("polybus", {}, 2, "calls_per_s", Stat(3e4, 2e4, 4e4, 5)))
    thr.write_json(directory / "throughput.json")
    (directory / "sweep.json").write_text('{"sweep": "app.toml", "cells": []}')


def test_page_is_deterministic_and_complete(tmp_path: Path) -> None:
    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    page = tmp_path / "docs" / "results.md"
    write_page(res, page, ["throughput", "latency"])
    first = page.read_bytes()
    text = first.decode()
    # registry order, skipped peers with their reason, ratios, machine, versions, date
    assert text.index("## throughput") < text.index("## latency")
    assert "skipped **mpi4py**: not installed (pip install mpi4py)" in text
    assert "| polybus/raw_socket rtt at 0 B | 1.17 |" in text
    assert "numpy 2.0" in text and "2026-11-21 10:00 UTC .. 2026-11-21 10:05 UTC (the first and last benchmark began)" in text
    assert "| 1000 | 62.0 [62.0\u201362.0] | 75.0 [74.0\u201376.0] |" in text
    # a copy of the same JSON files, read later, gives the same page
    other = tmp_path / "copy"
    shutil.copytree(res, other)
    assert render_page(load_results(other, ["throughput", "latency"]), page, res) == text
    write_page(res, page, ["throughput", "latency"])
    assert page.read_bytes() == first


def test_page_only_from_cli_links_plots(tmp_path: Path) -> None:
    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    (res / "latency.png").write_bytes(b"\x89PNG")
    page = tmp_path / "docs" / "results.md"
    assert cli(["bench", "--page-only", "--out", str(res), "--page", str(page)]) == 0
    text = page.read_text()
    assert "![latency](../results/latency.png)" in text
    assert "![throughput]" not in text


def test_a_json_or_plot_it_could_not_write_fails_before_the_benchmark_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json and --plot name one file each: a missing directory was made (anywhere a
    typo pointed), and a plot name matplotlib cannot write ended the run after it ran."""
    assert cli(["bench", "latency", "--quick", "--json", str(tmp_path / "nodir" / "x.json")]) == 2
    assert not (tmp_path / "nodir").exists()
    pytest.importorskip("matplotlib")
    assert cli(["bench", "latency", "--quick", "--plot", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert f"--json {tmp_path}/nodir/x.json: directory {tmp_path}/nodir does not exist" in err
    assert f"--plot {tmp_path}/x.txt: not a format it can write" in err


def test_the_default_page_is_beside_the_results_never_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out DIR wrote ./docs/results.md of whatever directory it was run from (a new
    user's own project page was replaced by one section). The default is now
    docs/results.md beside DIR if DIR's parent has docs/ (this repository's
    ``--out results/``), else DIR/results.md."""
    here = tmp_path / "project"
    (here / "docs").mkdir(parents=True)
    mine = here / "docs" / "results.md"
    mine.write_text("SENTINEL: the user's own page\n")
    monkeypatch.chdir(here)
    elsewhere = tmp_path / "runs" / "out"
    elsewhere.mkdir(parents=True)
    _write(elsewhere)
    assert cli(["bench", "--page-only", "--out", str(elsewhere)]) == 0
    assert mine.read_text() == "SENTINEL: the user's own page\n"
    assert (elsewhere / "results.md").read_text().startswith(TITLE)

    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "results").mkdir()
    _write(repo / "results")
    assert cli(["bench", "--page-only", "--out", str(repo / "results")]) == 0
    assert (repo / "docs" / "results.md").read_text().startswith(TITLE)
    assert not (repo / "results" / "results.md").exists()


def test_a_folder_beside_docs_not_named_results_keeps_its_page_to_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any DIR whose parent had docs/ made docs/results.md: `bench sort --quick --out
    quickout` in a clone replaced the page of record with one quick section. Only
    ``results/`` (the figures of record) makes docs/results.md now."""
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    record = repo / "docs" / "results.md"
    record.write_text(f"{TITLE}\n\nSENTINEL: the page of record\n")
    monkeypatch.chdir(repo)
    (repo / "quickout").mkdir()
    _write(repo / "quickout")
    assert cli(["bench", "--page-only", "--out", "quickout"]) == 0
    assert record.read_text() == f"{TITLE}\n\nSENTINEL: the page of record\n"
    assert (repo / "quickout" / "results.md").read_text().startswith(TITLE)


def test_a_page_that_is_not_a_results_page_is_not_overwritten(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    readme = tmp_path / "README.md"
    readme.write_text("# my project\n")
    assert cli(["bench", "--page-only", "--out", str(res), "--page", str(readme)]) == 2
    assert readme.read_text() == "# my project\n"
    assert f"--page {readme}: this file is not a results page" in capsys.readouterr().err
    # (checked before anything runs: a run of the suite would be lost at its end)
    assert cli(["bench", "latency", "--quick", "--out", str(res), "--page", str(readme)]) == 2
    assert not (res / "latency.png").exists()


def test_the_page_names_the_directory_its_command_was_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It said "Generated by `polybus bench all --out results/`" whatever --out was.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    _write(tmp_path / "runs" / "r1")
    pages = []
    for given in ("runs/r1", "runs/r1/", "./runs/r1"):  # (one directory, one page)
        assert cli(["bench", "--page-only", "--out", given]) == 0
        pages.append((tmp_path / "runs" / "r1" / "results.md").read_bytes())
    assert pages[0] == pages[1] == pages[2]
    text = pages[0].decode()
    assert "results/" not in text.split("\n")[2]
    assert text.split("\n")[2].startswith(
        "Generated from the JSON files in `runs/r1/`, which `polybus bench all --out "
        "runs/r1/` wrote (or `polybus bench NAME --out runs/r1/`, one benchmark's); "
        "`polybus bench --page-only --out runs/r1/` makes this page again from them")


def test_a_file_that_is_not_json_is_one_line_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    (res / "broken.json").write_text('{"bench": "latency", ')
    assert cli(["bench", "--page-only", "--out", str(res)]) == 2
    err = capsys.readouterr().err
    assert err == (f"polybus bench: error: {res}/broken.json: not JSON (Expecting property "
                   "name enclosed in double quotes: line 1 column 22); fix or remove it\n")
    assert not (res / "results.md").exists()


def test_a_file_that_is_not_json_fails_a_run_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.bench import registry

    ran: list[str] = []
    monkeypatch.setattr(registry, "run", lambda name, *a, **k: ran.append(name))
    res = tmp_path / "results"
    res.mkdir()
    (res / "broken.json").write_bytes(b"\xff\xfe")
    assert cli(["bench", "latency", "--quick", "--out", str(res)]) == 2
    assert ran == []
    assert f"{res}/broken.json: not JSON (not UTF-8 text)" in capsys.readouterr().err


def test_a_benchmark_s_json_with_rows_not_as_written_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    (res / "odd.json").write_text('{"bench": "latency", "rows": [{"system": "polybus"}]}')
    assert cli(["bench", "--page-only", "--out", str(res)]) == 2
    assert capsys.readouterr().err == (
        f"polybus bench: error: {res}/odd.json: a benchmark's JSON not as polybus writes "
        "one (rows[0] has no 'config'); fix or remove it\n")


def test_json_of_another_kind_is_left_out_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    _write(res)  # (a sweep's JSON among them)
    (res / "list.json").write_text("[1, 2]")
    assert cli(["bench", "--page-only", "--out", str(res)]) == 0
    err = capsys.readouterr().err
    for name in ("list.json", "sweep.json"):
        assert (f"polybus bench: warning: {res}/{name}: not a benchmark's JSON (it has no "
                '"bench" and "rows"); left out of the page') in err
    assert "## latency" in (res / "results.md").read_text()


@pytest.mark.parametrize("kind", ["missing", "empty", "others only"])
def test_page_only_with_no_benchmark_json_makes_nothing(
        kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It exited 0 with an empty page, making the directory a typo named.
    res = tmp_path / "results"
    if kind != "missing":
        res.mkdir()
    if kind == "others only":
        (res / "sweep.json").write_text('{"sweep": "app.toml", "cells": []}')
    assert cli(["bench", "--page-only", "--out", str(res)]) == 2
    err = capsys.readouterr().err
    if kind == "missing":
        assert not res.exists()
        assert err == (f"polybus bench: error: --out {res}: no such directory; --page-only "
                       "makes the page from the JSON files in it\n")
    else:
        assert not (res / "results.md").exists()
        assert err.endswith(f"polybus bench: error: --out {res}: no benchmark's JSON in it "
                            f"(NAME.json, as `polybus bench NAME --out {res}` writes); no "
                            "page made\n")


def test_two_json_files_of_one_benchmark_are_told_apart_by_their_files(tmp_path: Path) -> None:
    """sort.json beside sort-quick.json: the page had two identical ``## sort`` sections,
    both contents links to the first, and nothing said which file each came from."""
    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    shutil.copy(res / "throughput.json", res / "throughput-old.json")
    text = render_page(load_results(res, ["throughput", "latency"]), tmp_path / "r.md", res)
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## throughput (throughput-old.json)", "## throughput (throughput.json)",
                     "## latency"]
    assert ("Contents: [throughput (throughput-old.json)](#throughput-throughput-oldjson), "
            "[throughput (throughput.json)](#throughput-throughputjson), "
            "[latency](#latency)") in text


def test_versions_that_differ_between_the_files_are_all_said(tmp_path: Path) -> None:
    """The header's versions were the last file's alone: a page of latency run under
    numpy 2.0 and throughput under 2.1 said numpy 2.1 for both."""
    res = tmp_path / "results"
    res.mkdir()
    _write(res)  # (latency: numpy 2.0)
    thr = BenchResult("throughput", {"date": "2026-11-22 10:05 UTC",
                                     "versions": {"polybus": "0.1.0", "numpy": "2.1"}})
    thr.add(Row.of("polybus", {}, 2, "calls_per_s", Stat(3e4, 2e4, 4e4, 5)))
    thr.write_json(res / "throughput.json")
    for order in (["latency", "throughput"], ["throughput", "latency"]):
        text = render_page(load_results(res, order), tmp_path / "r.md", res)
        assert "- versions: numpy 2.0 (latency), 2.1 (throughput), polybus 0.1.0" in text


@pytest.mark.parametrize(("field", "value", "said"), [
    ("ratios", [{"name": "a/b", "value": "fast"}], "ratios[0].value is not a number: 'fast'"),
    ("machine", [2], "machine is not an object: [2]"),
    ("rows", [{"system": "polybus", "config": {}, "x": 0, "metric": "rtt_us", "median": "1",
               "min": 1, "max": 1, "n": 3}], "rows[0].median is not a number: '1'"),
    ("params", {"versions": ["numpy 2.0"]}, "params.versions is not an object: ['numpy 2.0']"),
])
def test_a_field_of_the_wrong_kind_is_named_not_a_traceback(
        field: str, value: object, said: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A ratio's value, a row's median that is a string, a machine or versions that is
    not an object: the page ended in a traceback (ValueError, TypeError, AttributeError)."""
    import json

    res = tmp_path / "results"
    res.mkdir()
    _write(res)
    doc = json.loads((res / "latency.json").read_text())
    doc[field] = value
    (res / "latency.json").write_text(json.dumps(doc))
    assert cli(["bench", "--page-only", "--out", str(res)]) == 2
    assert capsys.readouterr().err.endswith(  # (after the warning of sweep.json)
        f"polybus bench: error: {res}/latency.json: a benchmark's JSON not as polybus writes "
        f"one ({said}); fix or remove it\n")
    assert not (res / "results.md").exists()
