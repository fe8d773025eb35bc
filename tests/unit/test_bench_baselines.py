"""A speedup table says what it is a speedup over, in the terminal and on the page; and
the terminal's columns are not named by keys every one of them shares."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from polybus.bench.report import BenchResult, Row, print_table
from polybus.bench.results import render_page
from polybus.bench.stats import Stat

BASE = "one_process (the same row blocks looped in one process)"


def _result() -> BenchResult:
    res = BenchResult("matmul", {}, x_label="servers")
    res.baselines["speedup"] = BASE
    res.add(Row.of("one_process", {"n": 100}, 1, "seconds", Stat(1.0, 1.0, 1.0, 3)))
    for transport in ("tcp", "shm"):
        for k in (1, 2):
            cfg = {"n": 100, "mode": "stateful", "transport": transport, "modelled": False}
            res.add(Row.of("polybus", cfg, k, "seconds", Stat(0.5, 0.5, 0.5, 3)))
            res.add(Row.of("polybus", cfg, k, "speedup", Stat(2.0, 2.0, 2.0, 3)))
    return res


def _printed(res: BenchResult) -> str:
    console = Console(record=True, width=400, color_system=None)
    print_table(res, console)
    return console.export_text()


def test_the_speedup_table_names_its_baseline_in_the_terminal_and_on_the_page(
        tmp_path: Path) -> None:
    res = _result()
    text = _printed(res)
    title = next(line for line in text.splitlines() if line.startswith("matmul: speedup"))
    assert f"over {BASE}" in title
    assert "over" not in next(line for line in text.splitlines()
                              if line.startswith("matmul: s,"))  # (no baseline said)
    again = BenchResult.from_json(res.to_json())
    assert again.baselines == {"speedup": BASE}
    page = render_page([(again, json.loads(res.to_json()), tmp_path / "m.json")],
                       tmp_path / "results.md")
    speed = page[page.index("**speedup**"):]
    assert speed.splitlines()[2] == f"Speedup over {BASE}."


def test_columns_leave_out_the_keys_they_all_share() -> None:
    text = _printed(_result())
    speed = text[text.index("matmul: speedup"):]
    assert "n=100, mode=stateful, modelled=False" in speed.splitlines()[0]
    assert "polybus transport=tcp" in speed and "polybus transport=shm" in speed
    assert "mode=stateful," not in speed.split("\n", 1)[1]  # (said once, in the title)
