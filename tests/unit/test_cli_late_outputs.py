"""Output files that pass the check before the runs and still cannot be written at the
end (their directory removed meanwhile, a full disk, /proc): `polybus sweep`, `run` and
`bench` each say so in one line per file, write the others, and exit 2. It was an OSError
traceback after every run had been paid for, and the files after the failing one were
not written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from polybus.cli import cmd_run, cmd_sweep
from polybus.cli.main import main
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app

VARY = ["--vary", "modules.server.replication=1,2", "--repeat", "1"]
GONE = "No such file or directory"


@pytest.fixture
def gone(tmp_path: Path) -> Path:
    """A directory that is there for the check before the runs, and removed by the
    first run (as `rmdir` in another shell during a sweep)."""
    d = tmp_path / "gone"
    d.mkdir()
    return d


def _sweep(app: Path, gone: Path, monkeypatch: pytest.MonkeyPatch, *argv: str,
           fail: str | None = None, interrupt: bool = False) -> int:
    runs: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(sets)
        if gone.exists():
            gone.rmdir()
        if interrupt and len(runs) == 2:
            raise KeyboardInterrupt
        if fail is not None and fail in sets:
            raise RuntimeError("it broke")
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    return main(["sweep", str(app), *VARY, *argv])


def test_sweep_says_each_output_it_could_not_write_and_writes_the_others(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    app = write_one_call_app(tmp_path)
    rc = _sweep(app, gone, monkeypatch, "--json", str(gone / "r.json"), "--csv",
                str(tmp_path / "r.csv"), "--plot", str(gone / "r.png"))
    out, err = capsys.readouterr()
    assert rc == 2
    assert "speedup" in out  # the table, printed before
    assert err.splitlines()[-3:] == [
        f"polybus sweep: error: --json {gone}/r.json: could not be written: {GONE}",
        f"polybus sweep: error: --plot {gone}/r.png: could not be written: {GONE}",
        f"  the figures are in the table above, and in --csv {tmp_path}/r.csv"]
    assert "Traceback" not in err
    assert (tmp_path / "r.csv").read_text().count("\n") == 3  # header and both cells


def test_sweep_the_output_after_the_failing_one_is_still_written(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    rc = _sweep(app, gone, monkeypatch, "--json", str(tmp_path / "r.json"),
                "--csv", str(gone / "r.csv"), fail="modules.server.replication=2")
    err = capsys.readouterr().err
    assert rc == 2  # (not 1, which a failed cell alone gives: a file is missing)
    assert err.splitlines()[-2:] == [
        f"polybus sweep: error: --csv {gone}/r.csv: could not be written: {GONE}",
        f"  the figures are in the table above, and in --json {tmp_path}/r.json"]
    cells = json.loads((tmp_path / "r.json").read_text())["cells"]
    assert [c["error"] is None for c in cells] == [True, False]


def test_sweep_nothing_written_says_only_the_table(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    assert _sweep(app, gone, monkeypatch, "--csv", str(gone / "r.csv")) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "  the figures are in the table above"


def test_sweep_interrupted_still_exits_130_after_saying_what_it_could_not_write(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    rc = _sweep(app, gone, monkeypatch, "--json", str(gone / "r.json"), interrupt=True)
    assert rc == 130
    assert (f"polybus sweep: error: --json {gone}/r.json: could not be written: {GONE}"
            in capsys.readouterr().err)


def _run(monkeypatch: pytest.MonkeyPatch, gone: Path, raised: Exception | None) -> None:
    def run(*args: object, **kwargs: object) -> object:
        gone.rmdir()
        if raised is not None:
            raise raised
        return SimpleNamespace(result=42, to_json=lambda: {"result": 42})

    monkeypatch.setattr(cmd_run, "run", run)


def test_run_a_json_it_could_not_write_is_one_line_and_exit_2(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, gone, None)
    assert main(["run", "app.toml", "--quiet", "--json", str(gone / "r.json")]) == 2
    out, err = capsys.readouterr()
    assert out == "42\n"
    assert err == f"polybus run: error: --json {gone}/r.json: could not be written: {GONE}\n"


def test_run_a_failed_run_whose_json_cannot_be_written_still_says_why_it_failed(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The --json error replaced the run's own: only "could not be written" was said.
    _run(monkeypatch, gone, ConfigError("it is wrong", file="app.toml", key="a.b"))
    assert main(["run", "app.toml", "--json", str(gone / "r.json")]) == 2
    assert capsys.readouterr().err == (
        f"polybus run: error: --json {gone}/r.json: could not be written: {GONE}\n"
        "polybus run: error: app.toml: a.b: it is wrong\n")


def test_bench_a_json_it_could_not_write_is_one_line_the_plot_is_written_exit_2(
        tmp_path: Path, gone: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from polybus.bench import registry
    from polybus.bench.report import BenchResult, Row
    from polybus.bench.stats import Stat

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        gone.rmdir()  # and a file in its place (bench makes a missing directory)
        gone.write_text("")
        res = BenchResult("latency", x_label="payload bytes")
        for x in (0, 1000):
            res.add(Row.of("polybus", {"transport": "tcp"}, x, "rtt_us",
                           Stat(20.0 + x, 18.0, 30.0 + x, 3)))
        return res

    monkeypatch.setattr(registry, "run", run)
    png = tmp_path / "b.png"
    rc = main(["bench", "latency", "--quick", "--json", str(gone / "b.json"),
               "--plot", str(png)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"polybus bench: error: --json {gone}/b.json: could not be written: File exists" in err
    assert "Traceback" not in err and png.stat().st_size > 0
