"""BenchResult JSON shape (BENCHMARKS.md), table, plot, stats and the registry."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from rich.console import Console

import polybus
from polybus.bench import registry
from polybus.bench.peers import OPTIONAL_PEERS, available
from polybus.bench.plots import plot
from polybus.bench.report import BenchResult, Row, print_table
from polybus.bench.stats import Stat, repeat, summarize, time_repeat
from polybus.errors import UsageError


def _result() -> BenchResult:
    res = BenchResult("latency", {"sizes": [0, 1000, 1_000_000]}, x_label="payload bytes")
    for x, (raw, pb) in {0: (20.0, 30.0), 1000: (22.0, 33.0), 1_000_000: (500.0, 600.0)}.items():
        res.add(Row.of("raw_socket", {"transport": "tcp"}, x, "rtt_us",
                       Stat(raw, raw * 0.9, raw * 1.2, 5)))
        res.add(Row.of("polybus", {"transport": "tcp"}, x, "rtt_us",
                       Stat(pb, pb * 0.9, pb * 1.2, 5)))
    res.add_ratio("polybus/raw_socket rtt at 1000 B",
                  res.find("polybus", 1000, "rtt_us"), res.find("raw_socket", 1000, "rtt_us"))
    return res


def test_stats_median_min_max() -> None:
    assert summarize([3.0, 1.0, 2.0]) == Stat(2.0, 1.0, 3.0, 3)
    values = iter([5.0, 1.0, 4.0, 2.0])
    assert repeat(lambda: next(values), 3, warmup=1) == Stat(2.0, 1.0, 4.0, 3)
    inv = Stat(2.0, 1.0, 4.0, 3).map(lambda s: 1 / s)
    assert (inv.min, inv.median, inv.max) == (0.25, 0.5, 1.0)
    assert time_repeat(lambda: None, 2).n == 2
    with pytest.raises(ValueError):
        summarize([])


def test_json_has_exactly_the_schema_keys() -> None:
    d = json.loads(_result().to_json())
    assert set(d) == {"bench", "polybus_version", "machine", "params", "rows", "ratios"}
    assert d["bench"] == "latency"
    assert d["polybus_version"] == polybus.__version__
    assert set(d["machine"]) - {"commit"} == {"cpus", "python", "platform"}
    assert isinstance(d["machine"]["cpus"], int)
    assert d["params"]["sizes"] == [0, 1000, 1_000_000]
    for row in d["rows"]:
        assert set(row) == {"system", "config", "x", "metric", "median", "min", "max", "n"}
        assert row["min"] <= row["median"] <= row["max"]
    assert d["ratios"] == [{"name": "polybus/raw_socket rtt at 1000 B", "value": 1.5}]


def test_json_round_trip_keeps_skipped_and_notes() -> None:
    res = _result()
    res.skipped["c_socket"] = "no C compiler"
    res.notes.append("work modelled as sleep")
    back = BenchResult.from_json(res.to_json())
    assert back.rows == res.rows
    assert back.ratios == res.ratios
    assert back.skipped == {"c_socket": "no C compiler"}
    assert back.notes == ["work modelled as sleep"]
    assert back.x_label == "payload bytes"


def test_find_and_ratio_skip_missing_rows() -> None:
    res = _result()
    assert res.find("raw_socket", 0, "rtt_us", {"transport": "unix"}) is None
    assert res.add_ratio("nothing", None, res.find("polybus", 0, "rtt_us")) is None
    assert len(res.ratios) == 1


def test_print_table_rows_are_x_columns_are_systems() -> None:
    console = Console(record=True, width=200, color_system=None)
    res = _result()
    res.skipped["c_socket"] = "no cc [on PATH]"
    print_table(res, console)
    text = console.export_text()
    # (the key both columns share said once, above them, not in each header)
    assert "latency: round trip, µs, median [min\u2013max]; transport=tcp" in text
    assert "raw_socket" in text and "polybus" in text and "transport=tcp " not in text
    assert "1 MB" in text and "1000" in text
    assert "22.0 [19.8\u201326.4]" in text  # median [min-max]
    assert "polybus/raw_socket rtt at 1000 B" in text and "1.5" in text
    assert "no cc [on PATH]" in text  # markup-looking text is printed as is


def _wide() -> BenchResult:
    res = BenchResult("latency", x_label="payload bytes")
    for i in range(10):
        for x in (0, 1000):
            # (a key that differs in every column: named in each header, splits nothing)
            cfg = {"configuration": f"variant-number-{i}"}
            res.add(Row.of(f"peer_system_{i}", cfg, x,
                           "rtt_us", Stat(1000.0 + 11 * i + x, 900.0, 3000.0 + x, 3)))
    return res


def _cells(res: BenchResult) -> list[str]:
    return [*{r.label for r in res.rows},
            *(f"{r.median:.0f} [{r.min:.0f}\u2013{r.max:.0f}]" for r in res.rows)]


def test_a_wide_table_is_whole_when_stdout_is_not_a_terminal(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # rich fell back to 80 columns when not writing to a terminal: `polybus bench latency
    # | cat` and `> file` had headers and cells cut to "\u2026".
    from polybus.cli.main import main

    monkeypatch.setattr(registry, "run", lambda name, quick=False, progress=None: _wide())
    assert main(["bench", "latency"]) == 0
    print_table(_wide())  # the default console, as a script calling it would get
    out = capsys.readouterr().out
    assert "\u2026" not in out
    for cell in _cells(_wide()):
        assert out.count(cell) == 2, cell
    # one row a line, not wrapped; the rule above each benchmark stays 80 columns long
    assert 200 < max(len(line) for line in out.splitlines()) < 2000


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    out = plot(_result(), tmp_path / "lat.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    one_x = BenchResult("throughput", x_label="workers")
    one_x.add(Row.of("process_pool", {"chunksize": 1}, 2, "calls_per_s", Stat(1e4, 9e3, 1.1e4, 3)))
    one_x.add(Row.of("multiprocessing", {}, 2, "calls_per_s", Stat(5e4, 4e4, 6e4, 3)))
    assert plot(one_x, tmp_path / "thr.png").stat().st_size > 0


def test_a_series_keeps_its_colour_in_every_panel() -> None:
    # sort's panels show different series (seconds: one_process, polybus, mpi4py;
    # speedup: polybus only), and each panel coloured its own series from the first colour
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure, series_colours

    res = BenchResult("sort", x_label="elements")
    for n in (1024, 4096):
        res.add(Row.of("one_process", {"algorithm": "quicksort"}, n, "seconds",
                       Stat(1.0, 0.9, 1.1, 3)))
        for k in (1, 2):
            cfg = {"algorithm": "quicksort", "workers": k}
            res.add(Row.of("polybus", cfg, n, "seconds", Stat(1.0 / k, 0.4, 1.2, 3)))
            res.add(Row.of("polybus", cfg, n, "speedup", Stat(float(k), 0.9, 2.1, 3)))
            res.add(Row.of("mpi4py", {"algorithm": "quicksort", "ranks": k}, n, "seconds",
                           Stat(0.9 / k, 0.4, 1.0, 3)))
    fig = figure(res)
    try:
        drawn: dict[str, set[str]] = {}
        panels_of: dict[str, int] = {}
        for ax in fig.axes:
            in_panel = {c.get_label(): c.lines[0].get_color() for c in ax.containers}
            assert len(set(in_panel.values())) == len(in_panel)  # distinct within a panel
            for label, colour in in_panel.items():
                drawn.setdefault(label, set()).add(colour)
                panels_of[label] = panels_of.get(label, 0) + 1
    finally:
        plt.close(fig)
    polybus_labels = [lab for lab in drawn if lab.startswith("polybus")]
    assert len(polybus_labels) == 2 and all(panels_of[lab] == 2 for lab in polybus_labels)
    assert all(len(colours) == 1 for colours in drawn.values()), drawn
    expected = series_colours(r.label for r in res.rows)
    assert {lab: colours.pop() for lab, colours in drawn.items()} == expected


def test_matmul_draws_a_panel_per_size_and_one_legend() -> None:
    # 5 sizes in one panel per metric were 75 lines with a legend longer than the plot:
    # now a row per metric, a panel per n, series named without n, one legend below
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("matmul", x_label="servers")
    for n in (100, 200, 500):
        res.add(Row.of("one_process", {"n": n}, 1, "seconds", Stat(1.0, 0.9, 1.1, 3)))
        for k in (1, 2):
            for mode in ("stateless", "stateful"):
                cfg = {"n": n, "mode": mode}
                res.add(Row.of("polybus", cfg, k, "seconds", Stat(1.0 / k, 0.4, 1.2, 3)))
                res.add(Row.of("polybus", cfg, k, "speedup", Stat(float(k), 0.9, 2.1, 3)))
    fig = figure(res)
    try:
        titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible())
        assert titles == sorted(f"matmul: {m}, n={n}" for m in ("seconds", "speedup")
                                for n in (100, 200, 500))
        assert all(ax.get_legend() is None for ax in fig.axes)
        (legend,) = fig.legends
        labels = {t.get_text() for t in legend.get_texts()}
        assert labels == {"one_process", "polybus mode=stateless", "polybus mode=stateful"}
    finally:
        plt.close(fig)


def test_registry_is_lazy_and_names_mistakes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"latency", "bandwidth", "throughput", "rudy"} <= set(registry.REGISTRY)
    assert callable(registry.REGISTRY["throughput"])
    with pytest.raises(UsageError, match="did you mean 'latency'"):
        registry.get("latncy")
    monkeypatch.setattr(registry, "PLANNED", ("someday",))
    with pytest.raises(UsageError, match="not written yet"):
        registry.get("someday")  # planned, not registered
    with pytest.raises(KeyError):
        registry.REGISTRY["nope"]


def test_a_metric_may_have_its_own_x() -> None:
    res = BenchResult("rudy", x_label="pool size (PS)",
                      x_labels={"sequential_s": "requests (N), one client"})
    res.add(Row.of("polybus", {}, 10, "seconds", Stat(0.4, 0.3, 0.5, 3)))
    res.add(Row.of("polybus", {}, 500, "sequential_s", Stat(20.5, 20.4, 20.6, 3)))
    back = BenchResult.from_json(res.to_json())
    assert back.x_labels == res.x_labels and back.x_label_of("seconds") == "pool size (PS)"
    console = Console(record=True, width=120)
    print_table(back, console)
    text = console.export_text()
    assert "requests (N), one client" in text and "pool size (PS)" in text


def test_available_reports_each_optional_peer() -> None:
    avail = available()
    assert set(avail) == set(OPTIONAL_PEERS)
    for reason in avail.values():
        assert reason is None or (isinstance(reason, str) and reason)


def test_stat_helpers_positive_finite() -> None:
    assert Stat(1.0, 0.5, 2.0, 3).is_finite_positive()
    assert not Stat(math.inf, 0.5, math.inf, 3).is_finite_positive()


def test_bench_plot_without_matplotlib_fails_before_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`polybus bench NAME --plot F` without the plot extra: said at once; it ran the
    whole benchmark and then printed "no plot"."""
    import sys

    from polybus.cli.main import main as cli

    ran: list[str] = []
    monkeypatch.setattr(registry, "run",
                        lambda name, quick=False, progress=None: ran.append(name) or _wide())
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    png = tmp_path / "b.png"
    assert cli(["bench", "latency", "--quick", "--plot", str(png)]) == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and ran == [] and not png.exists()


def test_a_metric_measured_at_several_placements_gets_a_panel_each() -> None:
    # latency measures split, same and free: one crowded panel of every series at every
    # placement (with its legend over the lines) was unreadable
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("latency", x_label="payload bytes")
    for cpus in ("split", "same"):
        for size in (0, 1000, 10**6):  # (a wide range: a symlog axis, `axis_scale`)
            for system in ("raw_socket", "polybus"):
                res.add(Row.of(system, {"transport": "tcp", "cpus": cpus}, size, "rtt_us",
                               Stat(20.0, 19.0, 21.0, 3)))
    res.add(Row.of("ray", {"num_cpus": 2}, 0, "rtt_us", Stat(700.0, 690.0, 710.0, 3)))
    res.add(Row.of("ray", {"num_cpus": 2}, 1000, "rtt_us", Stat(710.0, 690.0, 720.0, 3)))
    fig = figure(res)
    try:
        titles = [ax.get_title() for ax in fig.axes]
        series = [{c.get_label(): c.lines[0].get_color() for c in ax.containers} for ax in fig.axes]
        left = [ax.get_xlim()[0] for ax in fig.axes]
    finally:
        plt.close(fig)
    assert titles == ["latency: rtt_us, cpus=split", "latency: rtt_us, cpus=same"]
    # named without the placement, the same colour in both panels; a row with no
    # placement (ray places its own processes) is drawn in each
    assert series[0] == series[1]
    assert set(series[0]) == {"raw_socket transport=tcp", "polybus transport=tcp", "ray num_cpus=2"}
    assert left == [0, 0]  # a 0-byte payload on a symlog axis: no ticks below zero


def test_one_placement_keeps_one_panel_and_full_names() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("latency", x_label="payload bytes")
    for size in (0, 1000):
        res.add(Row.of("polybus", {"transport": "tcp", "cpus": "split"}, size, "rtt_us",
                       Stat(20.0, 19.0, 21.0, 3)))
    fig = figure(res)
    try:
        assert [ax.get_title() for ax in fig.axes] == ["latency: rtt_us"]
        assert [c.get_label() for c in fig.axes[0].containers] == [
            "polybus transport=tcp,cpus=split"]
    finally:
        plt.close(fig)


def test_more_systems_than_a_table_takes_are_split_over_tables() -> None:
    # mandelbrot's 16 systems made one table hundreds of characters wide.
    from polybus.bench.report import TABLE_COLUMNS

    console = Console(record=True, width=4000, color_system=None)
    res = _wide()  # (10 systems)
    print_table(res, console)
    text = console.export_text()
    assert "median [min\u2013max] (1/2)" in text and "median [min\u2013max] (2/2)" in text
    assert "(3/2)" not in text
    for cell in _cells(res):
        assert text.count(cell) == 1, cell  # every figure once
    header = [ln for ln in text.splitlines() if "peer_system_0" in ln]
    assert header and all(ln.count("peer_system_") <= TABLE_COLUMNS for ln in header)
    assert text.count("payload bytes") == 2  # the x column in each table


def test_rudy_pool_table_says_the_load_it_was_measured_under() -> None:
    # Its table was headed "pool size (PS)" alone: C and N were in the ratios only.
    from polybus.bench.b_rudy import pool_label

    assert pool_label(100) == "pool size (PS); C=100 clients, N=100 requests"


def test_a_quick_runs_plot_says_so_in_each_title() -> None:
    """A --quick run's picture, shown beside a full run's, was told from it by nothing."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("latency", {"quick": True}, x_label="payload bytes")
    res.add(Row.of("polybus", {"transport": "tcp"}, 0, "rtt_us", Stat(20.0, 19.0, 21.0, 3)))
    fig = figure(res)
    try:
        assert [ax.get_title() for ax in fig.axes] == ["latency: rtt_us (--quick)"]
    finally:
        plt.close(fig)


def test_every_metric_has_the_words_its_table_is_headed_with() -> None:
    """A table's heading is its metric's unit (results.md): a metric without one was
    headed with its raw name (mandelbrot's `moved_pct`)."""
    from polybus.bench.report import METRIC_UNITS, METRICS, MORE_METRICS

    assert [m for m in (*METRICS, *MORE_METRICS) if m not in METRIC_UNITS] == []
