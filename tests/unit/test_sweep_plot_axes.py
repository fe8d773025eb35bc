"""What `polybus sweep --plot` draws on its axes (the picture itself, not the panels'
figures: those are in test_sweep_figures.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from polybus.sweep import Measured, run_sweep


def test_the_bytes_panels_start_at_zero_with_room_above_the_highest_point(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # set_ylim(bottom=0) kept the top matplotlib had chosen for 493..583 B (587.5 B):
    # the highest point sat on the frame, its marker cut in half.
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from polybus.cli.sweep_plot import plot

    def runner(path: str, sets: Sequence[str]) -> Measured:
        n = int(sets[-1].rsplit("=", 1)[1])
        return Measured(1.0 / n, 493 + 90 * (n - 1), 97 + 27 * (n - 1))

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 1, runner)
    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)  # (kept open to be looked at)
    drawn = plot(sweep, str(tmp_path / "s.png"))
    axes = {p.name: ax for p, ax in zip(drawn, figures[0].axes, strict=True)}
    for name, highest in (("bytes sent", 583), ("bytes received", 124)):
        bottom, top = axes[name].get_ylim()
        assert bottom == 0 and top >= highest * 1.05, (name, top)
    plt.close(figures[0])


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<svg"), (".pdf", b"%PDF")])
def test_the_picture_is_written_in_the_format_its_extension_names(
        tmp_path: Path, suffix: str, magic: bytes) -> None:
    # --help says so: .png, .pdf, .svg, ... (check_plot refuses one matplotlib cannot write)
    pytest.importorskip("matplotlib")
    from polybus.cli.sweep_plot import plot
    from polybus.cli.values import check_plot

    def runner(path: str, sets: Sequence[str]) -> Measured:
        return Measured(1.0 / int(sets[-1].rsplit("=", 1)[1]), 100, 50)

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 1, runner)
    out = tmp_path / f"s{suffix}"
    check_plot(str(out))
    plot(sweep, str(out))
    assert magic in out.read_bytes()[:400]


def test_the_speedup_and_efficiency_panels_start_at_zero_so_noise_draws_no_fall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A sweep of replication 1, 2 whose efficiency was 1 and 0.997 drew its efficiency
    # axis from 0.9967 to 1.0000: a third of a percent as a line from top to bottom.
    # Speedup and efficiency start at zero, as bytes do (times keep their fitted axis:
    # test_sweep_figures.py).
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from polybus.cli.sweep_plot import plot

    def runner(path: str, sets: Sequence[str]) -> Measured:
        n = int(sets[-1].rsplit("=", 1)[1])
        return Measured({1: 0.0568, 2: 0.02849}[n], 11087, 641)

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 1, runner)
    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)  # (kept open to be looked at)
    drawn = plot(sweep, str(tmp_path / "s.png"))
    axes = {p.name: ax for p, ax in zip(drawn, figures[0].axes, strict=True)}
    assert set(axes) == {"elapsed s", "speedup", "efficiency"}, set(axes)
    for name, panel in ((p.name, p) for p in drawn if p.name != "elapsed s"):
        highest = max(y for pts in panel.lines.values() for _, y in pts)
        bottom, top = axes[name].get_ylim()
        assert bottom == 0 and top >= highest * 1.05, (name, bottom, top)
    plt.close(figures[0])
