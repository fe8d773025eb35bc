"""SIGTERM (a scheduler's stop, `timeout`, `kill`) to `polybus sweep` or `polybus bench`
is said as a stop signal and exits 143, with what Ctrl-C says of how far it went and
where what ran is. A sweep said only ``polybus sweep: terminated`` (nothing of the runs
made, nor of the --json it had written), and a bench said ``interrupted (...)`` and
exited 130, as if Ctrl-C had stopped it. No processes: the runs are fakes raising what
main()'s SIGTERM handler raises."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.bench import registry
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat
from polybus.cli.main import Terminated, main
from polybus.testing.apps import write_one_call_app


def test_sweep_terminated_says_how_far_and_where(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli import cmd_sweep

    app = write_one_call_app(tmp_path)
    runs: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(sets)
        if len(runs) == 2:
            raise Terminated
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    out = tmp_path / "s.json"
    rc = main(["sweep", str(app), "--repeat", "1", "--quiet",
               "--vary", "modules.server.replication=1,2,4", "--json", str(out)])
    assert rc == 143
    assert capsys.readouterr().err.rstrip().endswith(
        f"polybus sweep: terminated (after 1 of 3 runs; what ran is in the table above "
        f"and in --json {out})")


def test_bench_terminated_is_said_so_and_exits_143(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(registry, "MODULES", {"latency": "polybus.bench.b_latency"})

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        res = BenchResult(name, {}, x_label="x")
        res.add(Row.of("polybus", {}, 1, "seconds", Stat(1.0, 1.0, 1.0, 3)))
        raise Terminated

    monkeypatch.setattr(registry, "run", run)
    out = tmp_path / "r"
    assert main(["bench", "latency", "--quick", "--out", str(out)]) == 143
    assert capsys.readouterr().err.rstrip().endswith(
        f"polybus bench: terminated (latency: the 1 row measured before it written to "
        f"{out / 'latency.json'}, \"complete\": false)")
