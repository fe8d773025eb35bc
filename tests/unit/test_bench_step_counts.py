"""A benchmark's progress count (`progress.begin`) is the number of steps it advances:
bench sort left out its mpi4py cells (the bar said 12/8, "left 0:00:00", while mpi4py
ran), and matmul's mpi4py steps fell short when mpi4py was skipped. No processes here:
the runs are stubbed, the steps counted."""

from __future__ import annotations

import os

import pytest

from polybus.bench import b_sort, peer_rows
from polybus.bench.peers import mpi
from polybus.bench.report import BenchResult
from polybus.bench.stats import Stat


class Count:
    def __init__(self) -> None:
        self.total: int | None = None
        self.done = 0
        self.steps: list[str] = []

    def begin(self, total: int, description: str) -> None:
        self.total, self.done = total, 0

    def advance(self, description: str) -> None:
        self.done += 1
        self.steps.append(description)


ONE = Stat(1.0, 1.0, 1.0, 3)


@pytest.mark.parametrize("quick", [True, False])
def test_sort_counts_the_mpi4py_steps(quick: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(b_sort, "_polybus", lambda toml, sets: 1.0)
    monkeypatch.setattr(b_sort, "_sorters", lambda: dict.fromkeys(b_sort.ALGORITHMS,
                                                                  lambda xs: xs))
    monkeypatch.setattr(b_sort, "why_unavailable", lambda peer: None)  # mpi4py runs (stubbed)
    monkeypatch.setattr(b_sort, "time_repeat", lambda fn, reps, warmup: ONE)
    monkeypatch.setattr(mpi, "sort_seconds", lambda *a, **k: ONE)
    monkeypatch.setattr(mpi, "describe", lambda: {})
    count = Count()
    result = b_sort.run(quick, count)
    assert any(r.system == "mpi4py" for r in result.rows)
    assert any("mpi4py" in s for s in count.steps)
    assert count.done == count.total, count.steps


def test_sort_counts_skipped_mpi4py_steps_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(b_sort, "_polybus", lambda toml, sets: 1.0)
    monkeypatch.setattr(b_sort, "_sorters", lambda: dict.fromkeys(b_sort.ALGORITHMS,
                                                                  lambda xs: xs))
    monkeypatch.setattr(b_sort, "why_unavailable", lambda peer: "not in this test")
    monkeypatch.setattr(b_sort, "time_repeat", lambda fn, reps, warmup: ONE)
    count = Count()
    b_sort.run(True, count)
    assert count.done == count.total, count.steps


def test_matmul_mpi4py_skipped_still_advances_every_step_counted() -> None:
    # b_matmul counts 2 transports x 2 modes x the real server counts per size
    result = BenchResult("matmul", {})
    result.skipped["mpi4py"] = "not here"
    result.skipped["mpi4py (tcp)"] = "not here"
    count = Count()
    servers = [1, 2]
    real = [k for k in servers if k <= (os.cpu_count() or 1)]

    def reps_of(n: int) -> int:
        return 1

    def chunk_of(n: int) -> int:
        return 1

    peer_rows.matmul(result, [100], servers, reps_of, count, chunk_of)
    assert count.done == 2 * 2 * len(real)
