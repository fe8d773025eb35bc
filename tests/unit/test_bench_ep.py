"""The ep benchmark's full run interleaves its systems round by round and pools them.

The measurements are replaced by stand-ins that log each call and return one figure per
repetition, so the test checks the order and the pooling, not any speed.
"""

from __future__ import annotations

from typing import Any

import pytest

from polybus.bench import b_ep, peer_rows
from polybus.bench.progress import NullProgress


def test_rounds_interleave_every_system_and_pool_their_repetitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(b_ep, "ROUNDS", 2)
    monkeypatch.setattr(b_ep, "REPS", 3)
    monkeypatch.setattr(b_ep, "pin_blas", lambda: None)
    monkeypatch.setattr("os.cpu_count", lambda: 2)

    def one(n: int, block: int, reps: int) -> list[float]:
        log.append("one")
        return [0.050] * reps

    def mine(n: int, block: int, k: int, reps: int, transport: str,
             watermark: int, mode: str) -> tuple[list[float], bool, float]:
        log.append(f"polybus {transport} {watermark} {mode} {k}")
        return [0.040 + 0.001 * len(log)] * reps, True, 1e6 * len(log)

    def pool(n: int, block: int, k: int, reps: int) -> list[float]:
        log.append(f"pool {k}")
        return [0.200] * reps

    def theirs(result: Any, n: int, block: int, k: int, reps: int,
               transport: str) -> list[float] | None:
        log.append(f"mpi {transport} {k}")
        return [0.045] * reps

    monkeypatch.setattr(b_ep, "_one_process", one)
    monkeypatch.setattr(b_ep, "_polybus_times", mine)
    monkeypatch.setattr(b_ep, "_pool", pool)
    monkeypatch.setattr(peer_rows, "ep_times", theirs)
    monkeypatch.setattr(peer_rows, "_record_mpi", lambda result, **kw: None)
    result = b_ep.run(quick=False, progress=NullProgress())

    per_round = len(log) // 2
    assert log[:per_round] == log[per_round:]  # every system once in each round, same order
    assert log[0] == "one" and {"mpi sm 2", "pool 2", "polybus shm 4 stateless 2",
                                 "polybus shm 8 stateful 2"} <= set(log[:per_round])
    assert result.params["rounds"] == 2 and result.params["reps"] == 3
    row = result.find("polybus", 2, "seconds",
                      {"transport": "shm", "callstyle": "async-demand(8)", "mode": "stateful"})
    assert row is not None and row.n == 6  # 3 repetitions from each of 2 rounds
    assert row.min < row.max  # the two rounds' figures differ here, and both are in it
    sent = result.find("polybus", 2, "bytes_sent",
                       {"transport": "shm", "callstyle": "async-demand(8)", "mode": "stateful"})
    assert sent is not None and sent.n == 2 and sent.min < sent.max  # a figure per round
    mpi = result.find("mpi4py", 2, "seconds", {"transport": "sm"})
    assert mpi is not None and mpi.n == 6 and mpi.median == pytest.approx(0.045)
    names = {r.name for r in result.ratios}
    assert {"polybus/mpi4py seconds, 2 workers (polybus shm stateful) (mpi4py sm)",
            "polybus/mpi4py seconds, 2 workers (polybus shm stateless) (mpi4py sm)"} <= names
