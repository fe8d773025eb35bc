"""mandelbrot's `moved_pct` counts moves, not rows: 100 x the calls migrated in / the 200
rows, so a row moved down the linear path three times counts three (the run of record's
Type 2 row is 224). Its heading, axis and the page's note said "% of rows moved between
replicas", a share that cannot pass 100."""

from __future__ import annotations

from polybus.bench.report import METRIC_UNITS
from polybus.bench.results import render_page


def test_moved_pct_is_named_as_moves_per_100_rows_not_a_share_of_rows() -> None:
    note = next(line for line in render_page([], "results.md").splitlines()
                if "moved_pct" in line)
    for text in (METRIC_UNITS["moved_pct"], note[note.index("`moved_pct`"):]):
        assert "% of rows" not in text and "share of rows" not in text, text
        assert "per 100 rows" in text, text
