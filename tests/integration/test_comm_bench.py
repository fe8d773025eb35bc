"""The matmul and ep benchmarks run (--quick) and give correct, complete tables."""

from __future__ import annotations

import pytest

from polybus.bench import registry
from polybus.bench.b_matmul import chunk_of


def test_ep_quick() -> None:
    r = registry.run("ep", quick=True)
    assert not any("WRONG" in n for n in r.notes)
    for transport in ("tcp", "shm"):
        assert r.find("polybus", 2, "speedup", {"transport": transport}) is not None
    assert r.find("process_pool", 2, "seconds") is not None
    assert "mpi4py" in r.skipped or r.find("mpi4py", 2, "seconds") is not None
    # polybus tcp is compared with mpi4py over tcp as well as over its shared memory
    names = [x.name for x in r.ratios]
    for mt in ("sm", "tcp"):
        if r.find("mpi4py", 2, "seconds", {"transport": mt}) is not None:
            assert f"polybus/mpi4py seconds, 2 workers (polybus tcp) (mpi4py {mt})" in names
    assert not any("(polybus shm) (mpi4py tcp)" in n for n in names)


@pytest.mark.slow
def test_matmul_quick_stateful_sends_less() -> None:
    r = registry.run("matmul", quick=True)
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
