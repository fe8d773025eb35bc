"""A cell of one measurement (bytes counted once, a `--repeat 1` run) shows its figure
alone, in the terminal table and on the results page: ``9680 [9680-9680]`` said nothing."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from polybus.bench.report import BenchResult, Row, print_table
from polybus.bench.results import render_page
from polybus.bench.stats import Stat


def _result() -> BenchResult:
    res = BenchResult("matmul", {"sizes": [10]}, x_label="servers")
    for x in (1, 2):
        res.add(Row.of("polybus", {"mode": "stateful"}, x, "seconds",
                       Stat(0.5 * x, 0.4 * x, 0.7 * x, 7)))
        res.add(Row.of("polybus", {"mode": "stateful"}, x, "bytes_sent",
                       Stat(9680.0 * x, 9680.0 * x, 9680.0 * x, 1)))
    return res


def test_terminal_table_shows_one_measurement_alone() -> None:
    console = Console(record=True, width=200, color_system=None)
    print_table(_result(), console)
    text = console.export_text()
    assert "9680" in text and "19360" in text
    assert "9680 [" not in text and "[9680" not in text  # no range of one sample
    assert "one measurement per cell" in text
    assert "0.5 [0.4\u20130.7]" in text  # seven repetitions keep theirs
    assert "n = 7 repetitions per cell" in text


def test_results_page_shows_one_measurement_alone(tmp_path: Path) -> None:
    res = _result()
    raw = json.loads(res.to_json())
    page = render_page([(res, raw, tmp_path / "matmul.json")], tmp_path / "results.md")
    bytes_part = page[page.index("**bytes sent**"):]
    assert bytes_part.startswith("**bytes sent**, one measurement per cell")
    assert "| 9680 |" in bytes_part and "[9680" not in bytes_part
    seconds_part = page[page.index("**s**"):page.index("**bytes sent**")]
    assert "median [min\u2013max], n = 7 repetitions per cell" in seconds_part
    assert "0.5 [0.4\u20130.7]" in seconds_part
