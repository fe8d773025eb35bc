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
               transport: str, warmup: int = 0) -> list[float] | None:
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


class _Seeds:
    """Stands in for numpy.random.default_rng: notes each seed, draws as the real one."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.seen: list[int] = []

    def __call__(self, seed: int) -> Any:
        self.seen.append(seed)
        return self.real(seed)


class _OneRank:
    """An MPI world of rank 0 alone, for the master's loop over its repetitions (no
    worker: no task is handed out, so no product is right, and none is looked at)."""

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def Barrier(self) -> None:
        pass


def test_every_system_multiplies_the_same_matrices_after_the_same_warmup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # polybus and the pool drew fresh matrices each repetition, the one-process loop and
    # mpi4py one pair for all; and none of the four ran the untimed product first that
    # matmul's systems run (and the README said ep's did).
    import numpy as np

    from polybus.bench.b_matmul import WARMUP
    from polybus.bench.peers import mpi_programs
    from polybus.bench.programs import matmul_client

    assert WARMUP >= 1
    reps = 2
    seeds = _Seeds(np.random.default_rng)
    monkeypatch.setattr(np.random, "default_rng", seeds)
    want = [1 + reps + w for w in range(WARMUP)] + [1 + rep for rep in range(reps)]

    # mpi4py's program is run here, in the test's process, with no MPI world: libmpi
    # loaded without MPI_Init (as bench/peers does to ask of mpi4py). Importing its MPI
    # as it was made this process an MPI singleton, whose shared-memory segment
    # (sm_segment.HOST.UID.JOB.0) a pytest-xdist worker, ending without MPI_Finalize,
    # left in Open MPI's backing directory, /dev/shm.
    rc = pytest.importorskip("mpi4py").rc
    monkeypatch.setattr(rc, "initialize", False)
    monkeypatch.setattr(rc, "finalize", False)
    monkeypatch.setattr(matmul_client, "multiply_block", lambda rows, cols: rows @ cols)
    monkeypatch.setattr(matmul_client, "wait", lambda x: x)
    runs = {
        "one_process": lambda: b_ep._one_process(16, 8, reps),
        "process_pool": lambda: b_ep._pool(16, 8, 1, reps),
        "polybus": lambda: matmul_client.blocks(16, 8, 1, reps, WARMUP)["seconds"],
        "mpi4py": lambda: mpi_programs.ep(_OneRank(), 16, 8, reps, WARMUP)["seconds"],
    }
    for system, measure in runs.items():
        seeds.seen.clear()
        assert len(measure()) == reps, system
        assert seeds.seen == want, system
    from mpi4py import MPI

    assert not MPI.Is_initialized()  # (no singleton: nothing of it left in /dev/shm)
