"""Ctrl-C during `polybus bench all --out DIR`: the benchmarks done were kept, but the
page was not made again from them, and every row of the interrupted benchmark was lost.
Now its rows so far are written (``"complete": false``; the page marks it) and the page
is made from DIR's JSON; the status is still 130. No processes: the runs are fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polybus.bench import registry
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat
from polybus.cli.main import main

ONE = Stat(1.0, 1.0, 1.0, 3)


@pytest.fixture
def three(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three benchmarks; the third is interrupted after one row ("stop" in ran: before)."""
    monkeypatch.setattr(registry, "MODULES", {"latency": "polybus.bench.b_latency",
                                              "bandwidth": "polybus.bench.b_bandwidth",
                                              "throughput": "polybus.bench.b_throughput"})
    ran: list[str] = []

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        ran.append(name)
        res = BenchResult(name, {}, x_label="x")
        if name == "throughput" and "stop at once" in ran:
            raise KeyboardInterrupt
        res.add(Row.of("polybus", {}, 1, "seconds", ONE))
        if name == "throughput":
            raise KeyboardInterrupt  # (the second row's cell, say)
        res.add(Row.of("polybus", {}, 2, "seconds", ONE))
        return res

    monkeypatch.setattr(registry, "run", run)
    return ran


def test_interrupted_all_writes_the_rows_so_far_and_the_page(
        tmp_path: Path, three: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    assert main(["bench", "all", "--quick", "--out", str(out)]) == 130
    assert three == ["latency", "bandwidth", "throughput"]
    doc = json.loads((out / "throughput.json").read_text())
    assert doc["complete"] is False and len(doc["rows"]) == 1
    assert "complete" not in json.loads((out / "latency.json").read_text())
    page = (out / "results.md").read_text()
    assert all(f"## {n}" in page for n in ("latency", "bandwidth", "throughput"))
    section = page.split("## throughput", 1)[1]
    assert "**Interrupted** (Ctrl-C)" in section
    assert "**Interrupted**" not in page.split("## throughput", 1)[0]
    # (it said only "polybus bench: interrupted": nothing of what it kept, or where)
    assert capsys.readouterr().err.rstrip().endswith(
        f"polybus bench: interrupted (throughput: the 1 row measured before it written to "
        f"{out / 'throughput.json'}, \"complete\": false)")


def test_interrupted_rows_do_not_replace_a_complete_run(
        tmp_path: Path, three: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    full = BenchResult("throughput", {"quick": True}, x_label="x")
    for x in (1, 2, 3):
        full.add(Row.of("polybus", {}, x, "seconds", ONE))
    full.write_json(out / "throughput.json")
    before = (out / "throughput.json").read_bytes()
    assert main(["bench", "throughput", "--quick", "--out", str(out)]) == 130
    assert (out / "throughput.json").read_bytes() == before
    assert f"{out}/throughput.json holds a complete run, kept" in capsys.readouterr().err
    assert "## throughput" in (out / "results.md").read_text()


def test_interrupted_before_any_row_writes_no_json(
        tmp_path: Path, three: list[str]) -> None:
    out = tmp_path / "r"
    three.append("stop at once")
    assert main(["bench", "throughput", "--quick", "--out", str(out)]) == 130
    assert not (out / "throughput.json").exists()


def test_a_partial_result_reads_back_as_one(tmp_path: Path) -> None:
    res = BenchResult("sort", {})
    res.complete = False
    again = BenchResult.from_json(res.to_json())
    assert again.complete is False
    assert BenchResult.from_json(BenchResult("sort", {}).to_json()).complete is True
