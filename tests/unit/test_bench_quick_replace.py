"""A `--quick` run never silently replaces a full run's figures: `polybus bench latency
--quick --out results/` (and `make bench-quick`, for every benchmark) replaced the
figures of record the README cites. It is refused, before anything runs, unless
`--replace` is given."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat
from polybus.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def _result(quick: bool, median: float) -> BenchResult:
    res = BenchResult("latency", {"quick": True} if quick else {}, x_label="payload bytes")
    res.add(Row.of("polybus", {}, 0, "rtt_us", Stat(median, median, median, 3)))
    return res


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from polybus.bench import registry

    names: list[str] = []

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        names.append(name)
        return _result(quick, 99.0)

    monkeypatch.setattr(registry, "run", run)
    return names


def test_a_quick_run_refuses_to_replace_a_full_run_s_json_in_out(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    _result(False, 20.0).write_json(out / "latency.json")
    before = (out / "latency.json").read_bytes()
    assert main(["bench", "latency", "--quick", "--out", str(out)]) == 2
    assert ran == []
    assert (out / "latency.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["latency.json"]  # (no page, no plot)
    assert capsys.readouterr().err == (
        f"polybus bench: error: --out {out}: {out}/latency.json holds the figures of a "
        "full run (not --quick), which a --quick run would replace; give another --out "
        "DIR, or add --replace to replace them\n")


def test_replace_lets_a_quick_run_replace_them(tmp_path: Path, ran: list[str]) -> None:
    out = tmp_path / "results"
    _result(False, 20.0).write_json(out / "latency.json")
    assert main(["bench", "latency", "--quick", "--out", str(out), "--replace"]) == 0
    assert ran == ["latency"]
    doc = json.loads((out / "latency.json").read_text())
    assert doc["params"]["quick"] is True and doc["rows"][0]["median"] == 99.0


def test_a_quick_run_replaces_a_quick_run_and_a_full_run_anything(
        tmp_path: Path, ran: list[str]) -> None:
    out = tmp_path / "results"
    _result(True, 20.0).write_json(out / "latency.json")
    assert main(["bench", "latency", "--quick", "--out", str(out)]) == 0
    assert main(["bench", "latency", "--out", str(out)]) == 0  # (full over quick: fine)
    assert ran == ["latency", "latency"]
    assert "quick" not in json.loads((out / "latency.json").read_text())["params"]


def test_a_quick_run_refuses_to_replace_a_full_run_s_json_file(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "latency.json"
    _result(False, 20.0).write_json(full)
    assert main(["bench", "latency", "--quick", "--json", str(full)]) == 2
    assert ran == []
    assert (f"--json {full}: {full} holds the figures of a full run (not --quick), which "
            "a --quick run would replace; name another --json file, or add --replace"
            in capsys.readouterr().err)


def test_make_bench_quick_writes_outside_the_figures_of_record() -> None:
    recipe = re.search(r"^bench-quick:.*\n\t(.*)$", (ROOT / "Makefile").read_text(),
                       re.MULTILINE)
    assert recipe is not None
    out = re.search(r"--out (\S+)", recipe.group(1))
    assert out is not None and "--quick" in recipe.group(1)
    assert out.group(1).rstrip("/") == "build/bench-quick"
    assert "build/" in (ROOT / ".gitignore").read_text().splitlines()
