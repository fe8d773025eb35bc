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


def test_advanced_past_its_total_the_bar_grows_and_says_no_time_left() -> None:
    # bench sort --quick said "9/8 ... 12/8" with "left 0:00:00" while work went on
    now = [0.0]
    progress = RichProgress(Console(file=io.StringIO()), get_time=lambda: now[0])
    progress.begin(2, "sort")
    for t in (1.0, 2.0, 3.0, 4.0):
        now[0] = t
        progress.advance("sort mpi4py")
    shown = _shown(progress)
    assert "4/5 elapsed 0:00:04, left -:--:--" in shown, shown
    assert "0:00:00" not in shown.split("left")[1]
    progress.begin(3, "rudy")  # (a new count: its estimate again)
    for t in (5.0, 6.0):
        now[0] = t
        progress.advance("rudy")
    assert "2/3 elapsed 0:00:02, left 0:00:01" in _shown(progress), _shown(progress)
