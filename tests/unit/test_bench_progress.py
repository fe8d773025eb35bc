"""`polybus bench`'s progress bar says the time left, as `polybus sweep`'s does (the
same column, bench/progress.Times): it said only the time elapsed."""

from __future__ import annotations

import io

from rich.console import Console

from polybus.bench.progress import RichProgress


def _shown(progress: RichProgress) -> str:
    """The bar's line as text."""
    text = io.StringIO()
    bar = progress._bar
    Console(file=text, width=200, color_system=None).print(bar.make_tasks_table(bar.tasks))
    return text.getvalue()


def test_the_bench_bar_says_the_time_elapsed_and_the_time_left() -> None:
    now = [0.0]
    progress = RichProgress(Console(file=io.StringIO()), get_time=lambda: now[0])
    progress.begin(4, "latency tcp")
    assert "0/4 elapsed 0:00:00, left -:--:--" in _shown(progress)  # (no estimate yet)
    for t in (1.0, 2.0):  # a step a second, two of the four done
        now[0] = t
        progress.advance("latency shm")
    shown = _shown(progress)
    assert "latency shm" in shown and "2/4 elapsed 0:00:02, left 0:00:02" in shown, shown
    progress.begin(3, "throughput")  # (a second begin starts the count again)
    now[0] = 5.0
    progress.advance("throughput")
    assert "1/3 elapsed 0:00:03, left -:--:--" in _shown(progress)
