"""`polybus bench NAME --out X` checks X before anything runs, as --json and --plot are:
X a regular file (or /proc/x, which takes no directory) ran the whole benchmark, printed
its tables and only then failed, "--out X/latency.json: could not be written: File
exists", three times. X is a directory, or made now; the files it will hold writable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat
from polybus.cli.main import main


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from polybus.bench import registry

    names: list[str] = []

    def run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        names.append(name)
        res = BenchResult(name, {"quick": True}, x_label="payload bytes")
        res.add(Row.of("polybus", {}, 0, "rtt_us", Stat(1.0, 1.0, 1.0, 3)))
        return res

    monkeypatch.setattr(registry, "run", run)
    return names


def _bench(out: str) -> int:
    return main(["bench", "latency", "--quick", "--out", out])


def test_out_a_regular_file_is_refused_before_anything_runs(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    assert _bench(str(afile)) == 2
    assert ran == []
    out, err = capsys.readouterr()
    assert err == f"polybus bench: error: --out {afile}: not a directory\n"
    assert out == "" and afile.read_text() == "mine\n"


def test_out_under_a_regular_file_is_refused_before_anything_runs(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    assert _bench(str(afile / "sub")) == 2
    assert ran == []
    assert capsys.readouterr().err == (
        f"polybus bench: error: --out {afile}/sub: {afile} is not a directory\n")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
def test_out_where_no_directory_can_be_made_is_refused_before_anything_runs(
        ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench("/proc/polybus-no-such-dir") == 2
    assert ran == []
    err = capsys.readouterr().err
    assert err.startswith("polybus bench: error: --out /proc/polybus-no-such-dir: cannot be "
                          "made: "), err
    assert err.count("\n") == 1


def test_a_file_out_would_write_that_is_a_directory_is_refused_before_anything_runs(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r" / "latency.png").mkdir(parents=True)
    assert _bench(str(tmp_path / "r")) == 2
    assert ran == []
    assert "latency.png is a directory" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_out_directory_is_refused_before_anything_runs(
        tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    r = tmp_path / "r"
    r.mkdir(mode=0o555)
    try:
        assert _bench(str(r)) == 2
    finally:
        r.chmod(0o755)
    assert ran == []
    assert "not writable by this user" in capsys.readouterr().err


def test_a_new_out_directory_is_made_and_written(tmp_path: Path, ran: list[str]) -> None:
    out = tmp_path / "new" / "results"
    assert _bench(str(out)) == 0
    assert ran == ["latency"]
    assert {"latency.json", "results.md"} <= {p.name for p in out.iterdir()}


def test_out_without_matplotlib_writes_the_figures_and_says_no_picture_was_written(
        tmp_path: Path, ran: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # It printed "no plot: No module named 'matplotlib'" after the run and exited 0, while
    # the README said --out writes NAME.json and NAME.png: said before the run now, and
    # with the file that was not written, and how to get it.
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "out"
    assert _bench(str(out)) == 0  # (the JSON and the page are the figures: written)
    assert ran == ["latency"]
    assert sorted(p.name for p in out.iterdir()) == ["latency.json", "results.md"]
    err = capsys.readouterr().err
    before = (f"polybus bench: warning: --out {out}: no NAME.png will be written, as "
              "matplotlib did not import (")
    assert err.startswith(before), err
    assert (f"polybus bench: warning: {out / 'latency.png'} not written: matplotlib did not "
            "import (") in err, err
    assert err.count("pip install 'polybus[plot]'") == 2, err
