"""What a sweep says around its figures: the bar's times named, where a failed cell's
whole error is (only where it is), and the failed combinations its plot leaves out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.sweep import run_sweep
from polybus.testing.apps import write_one_call_app

VARY = ["--vary", "modules.server.replication=1,2", "--repeat", "1"]
TWO_LINES = "ValueError: neg\n  File 'client.py', line 3, in main"


def test_the_bar_names_both_its_times() -> None:
    # It read "0:00:02 left 0:00:01", the first time unnamed.
    from rich.progress import Progress

    from polybus.bench.progress import Times, times

    assert times(2.7, 0.2) == "elapsed 0:00:02, left 0:00:01"
    assert times(None, None) == "elapsed -:--:--, left -:--:--"
    now = [0.0]
    bar = Progress(Times(), get_time=lambda: now[0])
    task = bar.add_task("sweep", total=3)
    for t in (1.0, 2.0):
        now[0] = t
        bar.update(task, advance=1)
    assert str(Times().render(bar.tasks[0])) == "elapsed 0:00:02, left 0:00:01"


def _failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    def runner(path: str, sets: Sequence[str]) -> float:
        if "modules.server.replication=2" in sets:
            raise RuntimeError(TWO_LINES)
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    return main(["sweep", str(write_one_call_app(tmp_path)), *VARY, *argv])


@pytest.mark.parametrize(("argv", "said"), [
    ([], "(full text with --json FILE or --csv FILE)"),
    (["--csv", "s.csv"], "(full text in --csv)"),
    (["--json", "s.json", "--csv", "s.csv"], "(full text in --json/--csv)"),
])
def test_a_failed_cell_says_its_full_text_is_where_it_is(
        argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # It said "(full text in --json/--csv)" when neither was given.
    monkeypatch.chdir(tmp_path)
    assert _failing(tmp_path, monkeypatch, *argv) == 1
    out = capsys.readouterr().out
    assert f"RuntimeError: ValueError: neg {said}" in out


def test_failed_combinations_the_plot_leaves_out_are_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "s.png"
    assert _failing(tmp_path, monkeypatch, "--plot", str(png)) == 1
    assert png.read_bytes()[:4] == b"\x89PNG"
    err = capsys.readouterr().err
    # It read "--plot s.png: not drawn: ...", as if the picture had not been written.
    assert err.endswith(
        f"polybus sweep: --plot {png}: no point for 1 failed combination (replication=2)\n")
    assert "not drawn" not in err


def test_the_note_of_what_is_not_drawn_names_a_few_and_counts_the_rest() -> None:
    from polybus.cli.sweep_plot import not_drawn

    varies = [("modules.server.replication", ["1", "2", "3", "4", "5"]),
              ("modules.client.use.f.callstyle", ["sync"])]

    def runner(path: str, sets: Sequence[str]) -> float:
        if "modules.server.replication=1" not in sets:
            raise RuntimeError("no")
        return 1.0

    assert not_drawn(run_sweep("a.toml", varies[:1], 1, lambda p, s: 1.0)) is None
    assert not_drawn(run_sweep("a.toml", varies, 1, runner)) == (
        "no point for 4 failed combinations (replication=2, callstyle=sync; replication=3, "
        "callstyle=sync; replication=4, callstyle=sync; and 1 more)")


def test_a_timed_out_cell_keeps_the_file_and_line_it_was_at() -> None:
    # The cell read "timed out after 0.3 s while the program was at /tmp/trial-sweep/
    # mine/..." (cut at BRIEF): where the program was, the point of the message, was lost.
    from polybus.cli.sweep_table import BRIEF, brief

    error = ("timed out after 60 s while the program was at /home/someone/projects/"
             "my-app/client.py, line 7, in main; it was waiting for a call to f on "
             "server-0, not yet answered")
    cell = brief(error, ["--json"])
    assert cell.startswith("timed out after 60 s while the program was at client.py, "
                           "line 7, in main")
    assert cell.endswith("... (full text in --json)")
    assert len(cell) <= BRIEF + len(" (full text in --json)")
    # short enough as it is: left whole, paths and all
    assert brief("OSError: /a/b.txt", ["--json"]) == "OSError: /a/b.txt"
    # a fraction is not a path
    assert brief("ValueError: 1/2 of " + "x" * 80).startswith("ValueError: 1/2 of xxx")
