"""`--json -` writes the JSON to standard output, for `sweep` and `bench` as for `run`
(they wrote a file named ``-``); the table, the progress and what the program prints
go to stderr, so standard output is the JSON alone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.testing.apps import write_one_call_app

VARY = ["--vary", "modules.server.replication=1,2", "--repeat", "1"]


def _sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    def runner(path: str, sets: Sequence[str]) -> float:
        print("the program's own line")  # (a client that prints: not in the JSON)
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    app = write_one_call_app(tmp_path)
    monkeypatch.chdir(tmp_path)
    return main(["sweep", str(app), *VARY, *argv])


def test_sweep_json_dash_is_standard_output_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(tmp_path, monkeypatch, "--json", "-") == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [c["config"]["modules.server.replication"] for c in doc["cells"]] == [1, 2]
    assert "speedup" in err and "the program's own line" in err
    assert not (tmp_path / "-").exists()


def test_sweep_csv_dash_is_standard_output_and_json_still_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(tmp_path, monkeypatch, "--csv", "-", "--json", "s.json") == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("modules.server.replication,median_s,")
    assert len(out.splitlines()) == 3 and "speedup" in err
    assert json.loads((tmp_path / "s.json").read_text())["cells"]
    assert not (tmp_path / "-").exists()


def test_sweep_json_and_csv_cannot_both_be_standard_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(tmp_path, monkeypatch, "--json", "-", "--csv", "-") == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("polybus sweep: error: --csv -: standard output as --json -; give "
                   "each output a file of its own\n")


def test_bench_json_dash_is_standard_output_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.bench import registry
    from polybus.bench.report import BenchResult, Row
    from polybus.bench.stats import Stat

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        print("a benchmark's own line")
        res = BenchResult("latency", x_label="payload bytes")
        res.add(Row.of("polybus", {}, 0, "rtt_us", Stat(20.0, 18.0, 30.0, 3)))
        return res

    monkeypatch.setattr(registry, "run", run)
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "latency", "--quick", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["bench"] == "latency" and doc["params"]["quick"] is True
    assert "round trip" in err and "a benchmark's own line" in err
    assert not (tmp_path / "-").exists()
