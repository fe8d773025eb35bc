"""The matmul and ep benchmarks run (--quick) and give correct, complete tables.

The quick runs checked here are the session's (`quick_bench`, tests/conftest.py), which
test_bench_quick checks for the JSON schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from polybus.bench.b_matmul import COALESCE, PLACED, SPREAD, chunk_of

if TYPE_CHECKING:
    from conftest import QuickBenchmarks  # tests/conftest.py


def test_ep_quick(quick_bench: QuickBenchmarks) -> None:
    r = quick_bench("ep").result
    assert not any("WRONG" in n for n in r.notes)
    for transport in ("tcp", "shm"):
        for mode in ("stateful", "stateless"):
            assert r.find("polybus", 2, "speedup", {"transport": transport, "mode": mode})
    # stateful: each block of A and of B goes to a replica once, not with each of its tasks
    sent = {mode: r.find("polybus", 2, "bytes_sent", {"transport": "tcp", "mode": mode})
            for mode in ("stateful", "stateless")}
    assert sent["stateful"] and sent["stateless"]
    assert sent["stateful"].median * 1.5 < sent["stateless"].median
    assert r.find("process_pool", 2, "seconds") is not None
    assert "mpi4py" in r.skipped or r.find("mpi4py", 2, "seconds") is not None
    # polybus tcp is compared with mpi4py over tcp as well as over its shared memory
    names = [x.name for x in r.ratios]
    for mt in ("sm", "tcp"):
        if r.find("mpi4py", 2, "seconds", {"transport": mt}) is not None:
            for mode in ("stateful", "stateless"):
                assert (f"polybus/mpi4py seconds, 2 workers (polybus tcp {mode}) (mpi4py {mt})"
                        in names)
    assert not any("(polybus shm" in n and "(mpi4py tcp)" in n for n in names)


@pytest.mark.slow
def test_matmul_quick_stateful_sends_less(quick_bench: QuickBenchmarks) -> None:
    r = quick_bench("matmul").result
    assert not any("WRONG" in n for n in r.notes)
    n = 200
    calls = -(-n // chunk_of(n))
    full = r.find("polybus", 2, "bytes_sent", {"n": n, "mode": "stateless"})
    state = r.find("polybus", 2, "bytes_sent", {"n": n, "mode": "stateful"})
    assert full is not None and state is not None
    # Stateless: B with every call; stateful: A once and B once per server.
    assert full.median >= 8 * n * n * calls
    assert state.median <= 1.2 * 8 * n * n * (1 + 2)
    for mode in ("stateless", "stateful"):
        assert r.find("polybus", 2, "seconds", {"n": n, "mode": mode, "transport": "shm"})
    # the baseline runs the same tasks, and the whole product is beside it for reference
    assert r.find("one_process", 1, "seconds", {"n": n}) is not None
    assert r.find("one_process", 1, "seconds", {"n": n, "kernel": "A@B"}) is not None
    # the speedup of record again, one process and polybus back to back (one round here)
    paired = r.find("polybus", 2, "speedup", {"n": n, "interleaved": 1})
    assert paired is not None and paired.n == 1 and paired.median > 0
    plain = r.find("polybus", 2, "speedup", {"n": n, "mode": "stateful", "transport": "shm"})
    assert plain is not None and "interleaved" not in plain.config  # (found first)
    # in the same rounds, with coalesce, and with coalesce and each server on its own CPU
    for label in ({"coalesce": COALESCE}, {"placed": f"{SPREAD}, coalesce={COALESCE}"}):
        row = r.find("polybus", 2, "speedup", {"n": n, "interleaved": 1, **label})
        assert row is not None and row.median > 0
    # the aggregated row is extra (n <= 200), labelled, with its own ratio; the plain
    # shm row is still the one the plain ratios find
    for m in (100, 200):  # (20 calls, 10 to each replica: one batch each)
        for mode in ("stateless", "stateful"):
            plain = r.find("polybus", 2, "seconds", {"n": m, "mode": mode, "transport": "shm"})
            assert plain is not None and "aggregate" not in plain.config
            agg = r.find("polybus", 2, "seconds", {"n": m, "mode": mode, "aggregate": 10})
            assert agg is not None and agg.config["transport"] == "shm"
            if r.find("mpi4py", 2, "seconds", {"n": m, "mode": mode, "transport": "sm"}):
                assert (f"polybus/mpi4py {mode} seconds n={m} servers=2 (polybus shm "
                        "aggregate=10) (mpi4py sm)") in [x.name for x in r.ratios]
            # so is the placed row (cpus on the client and the servers), on 2 CPUs
            placed = r.find("polybus", 2, "seconds", {"n": m, "mode": mode, "cpus": PLACED})
            assert placed is not None and placed.config["transport"] == "shm"
            assert "cpus" not in plain.config
            if r.find("mpi4py", 2, "seconds", {"n": m, "mode": mode, "transport": "sm"}):
                assert (f"polybus/mpi4py {mode} seconds n={m} servers=2 (polybus shm "
                        f"cpus={PLACED}) (mpi4py sm)") in [x.name for x in r.ratios]


@pytest.mark.parametrize("stateful", [False, True])
def test_matmul_aggregated_flushes_when_the_client_waits(stateful: bool) -> None:
    """aggregate 64 > the 10 calls each replica gets and a linger of 100 s: only the
    client's wait can send the batches (a stall would hit the test's timeout); the
    answers are the same products."""
    import json

    from polybus.bench.b_matmul import _programs
    from polybus.runner import run

    toml = _programs() / ("matmul_stateful.toml" if stateful else "matmul.toml")
    n = 30
    out = run(toml, ["modules.server.replication=2", "modules.server.transport=shm",
                     f"modules.client.args={json.dumps([n, 1, 0.0, chunk_of(n), 3, 1])}",
                     'modules.client.use.multiply_rows={callstyle="async", aggregate=64, '
                     'linger="100s"}'])
    assert out.result["correct"] is True
    assert len(out.result["seconds"]) == 3


def test_small_products_are_repeated_more_except_in_quick_runs() -> None:
    from polybus.bench.b_matmul import REPS_SMALL, reps_for

    assert reps_for(10, 7) == REPS_SMALL[10] > 7 and reps_for(100, 7) == REPS_SMALL[100] > 7
    assert reps_for(200, 7) == REPS_SMALL[200] > 7
    assert reps_for(1000, 7) == 7 and reps_for(10, 1) == 1  # (--quick: one product)
