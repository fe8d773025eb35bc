"""`polybus sweep --plot` draws the bytes the client sent, or received, only where they
differ between combinations by more than noise: a panel of 13.9 kB against 13.7 kB (a
new user's sweep of callstyle) only took room; the table has the figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from polybus.cli.sweep_plot import BYTES_NOISE, differs, panels
from polybus.sweep import Measured, Sweep, run_sweep

CALLSTYLE = ("modules.client.use.f.callstyle", ["sync", "async", "future"])


def _sweep(sent: Mapping[str, int | None], received: Mapping[str, int | None]) -> Sweep:
    def runner(path: str, sets: Sequence[str]) -> Measured:
        style = sets[-1].rsplit("=", 1)[1]
        return Measured(1.0, sent[style], received[style])

    return run_sweep("a.toml", [CALLSTYLE], 1, runner)


def _names(sweep: Sweep) -> list[str]:
    return [p.name for p in panels(sweep)]


def test_bytes_within_a_few_percent_have_no_panel() -> None:
    # (the figures of that sweep: sent the same, received 1.4% apart)
    sweep = _sweep({"sync": 527760, "async": 527760, "future": 527760},
                   {"sync": 13880, "async": 13682, "future": 13790})
    assert _names(sweep) == ["elapsed s", "speedup"]


def test_bytes_that_differ_have_their_panel_and_only_they() -> None:
    # a cache: sent falls by half; received 3% apart stays out
    sweep = _sweep({"sync": 527760, "async": 264000, "future": 264100},
                   {"sync": 13880, "async": 13500, "future": 13600})
    assert _names(sweep) == ["elapsed s", "speedup", "bytes sent"]


def test_bytes_not_counted_have_no_panel() -> None:
    none = {"sync": None, "async": None, "future": None}
    assert _names(_sweep(none, none)) == ["elapsed s", "speedup"]


def test_the_rule() -> None:
    assert BYTES_NOISE == 0.05
    assert not differs([]) and not differs([None, None]) and not differs([100])
    assert not differs([100, 105, None])  # 5 of 105: under 5%
    assert differs([100, 106])  # 6 of 106: over
    assert differs([0, 10]) and not differs([0, 0])
