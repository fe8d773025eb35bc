"""`--quick` of every registered benchmark runs and writes JSON of BENCHMARKS.md's schema.

Proves the benchmarks work; judges no speed. Parametrized over the registry, so the
benchmarks other engineers register are covered as they land; the planned ones not yet
written are skipped with that reason. The run itself is the session's one quick run of
each benchmark (`quick_bench`, tests/conftest.py), which other tests check for content.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest

from polybus.bench import registry
from polybus.bench.report import METRICS, MORE_METRICS, MORE_SYSTEMS, SYSTEMS
from polybus.bench.schema import fault

if TYPE_CHECKING:
    from conftest import QuickBenchmarks  # tests/conftest.py

ALL = sorted({*registry.names(), *registry.PLANNED})
KEYS = {"bench", "polybus_version", "machine", "params", "rows", "ratios"}
ROW_KEYS = {"system", "config", "x", "metric", "median", "min", "max", "n"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_quick_benchmark_runs_and_writes_schema(name: str, quick_bench: QuickBenchmarks
                                                ) -> None:
    if name not in registry.names():
        pytest.skip(f"benchmark {name!r} is not written yet")
    run = quick_bench(name)  # `polybus bench NAME --quick --json F`, in this process
    assert run.exit_code == 0
    d = run.json
    assert set(d) >= KEYS and d["bench"] == name
    assert fault(d) is None, fault(d)  # (each field of the kind the results page reads)
    assert d["rows"], "a benchmark writes at least one row"
    for row in d["rows"]:
        assert set(row) >= ROW_KEYS
        # BENCHMARKS.md's names (and the few more, for what none of them fits)
        assert row["system"] in SYSTEMS + MORE_SYSTEMS, row
        assert row["metric"] in METRICS + MORE_METRICS, row
        assert row["min"] <= row["median"] <= row["max"] and row["n"] >= 1
        assert all(math.isfinite(row[k]) for k in ("median", "min", "max"))
    assert d["params"]["quick"] is True
    if name == "sort":  # every cell alike, the one_process baseline included (not one cold run)
        assert {r["n"] for r in d["rows"]} == {d["params"]["reps"]}
        assert d["params"]["reps"] >= 3 and d["params"]["warmup"] >= 1
    if name in ("latency", "bandwidth", "throughput"):
        assert any(r["system"] == "polybus" for r in d["rows"])
        assert any(r["name"].startswith("polybus") for r in d["ratios"])
