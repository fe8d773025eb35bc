"""The results page splits a table too wide to read by a configuration key, and loses
no figure doing so."""

from __future__ import annotations

from polybus.bench.report import BenchResult, Row, _fmt
from polybus.bench.results import _tables
from polybus.bench.stats import Stat


def _stat(v: float) -> Stat:
    return Stat(v, v, v, 3)


def _tables_of(result: BenchResult) -> list[list[str]]:
    """Each markdown table of the section: its lines, header first."""
    out: list[list[str]] = []
    current: list[str] = []
    for line in _tables(result):
        if line.startswith("|"):
            current.append(line)
        elif current:
            out.append(current)
            current = []
    return out


def test_a_wide_table_is_split_by_size_with_the_baseline_in_each() -> None:
    res = BenchResult("matmul", {}, x_label="servers")
    res.add(Row.of("one_process", {}, 1, "seconds", _stat(0.5)))
    medians = []
    for n in (10, 100):
        for variant in range(8):  # 17 columns in all: too wide for one table
            v = n + variant / 10
            medians.append(v)
            res.add(Row.of("polybus", {"n": n, "variant": variant}, 2, "seconds", _stat(v)))
    lines = _tables(res)
    assert "*n=10*" in lines and "*n=100*" in lines
    tables = _tables_of(res)
    assert len(tables) == 2
    for table in tables:
        header = table[0]
        assert "one_process" in header            # the baseline, in every table
        assert "polybus variant=0" in header      # the heading's key is not repeated
        assert "n=" not in header
        assert len(header.split("|")) - 2 == 1 + 1 + 8  # x, baseline, 8 variants
    text = "\n".join(lines)
    for v in medians:  # every figure, in its cell
        assert f"| {_fmt(v)} [{_fmt(v)}" in text


def test_many_values_of_one_key_stay_one_table() -> None:
    """Sixteen strategies would make sixteen tables of one column: not split."""
    res = BenchResult("mandelbrot", {}, x_label="servers")
    for i in range(16):
        res.add(Row.of("polybus", {"strategy": f"s{i}"}, 4, "seconds", _stat(1.0 + i)))
    assert len(_tables_of(res)) == 1
    assert not [line for line in _tables(res) if line.startswith("*") and not line.startswith("**")]


def test_a_narrow_table_is_not_split() -> None:
    res = BenchResult("latency", {}, x_label="payload bytes")
    for cpus in ("split", "same"):
        for system in ("raw_socket", "polybus"):
            res.add(Row.of(system, {"cpus": cpus}, 0, "rtt_us", _stat(50.0)))
    tables = _tables_of(res)
    assert len(tables) == 1 and "polybus cpus=same" in tables[0][0]
