"""The matmul and ep benchmarks run (--quick) and give correct, complete tables."""

from __future__ import annotations

import pytest

from polybus.bench import registry


def test_ep_quick() -> None:
    r = registry.run("ep", quick=True)
    assert not any("WRONG" in n for n in r.notes)
    assert r.find("polybus", 2, "speedup") is not None
    assert "mpi4py" in r.skipped or r.find("mpi4py", 2, "seconds") is not None


@pytest.mark.slow
def test_matmul_quick_stateful_sends_less() -> None:
    r = registry.run("matmul", quick=True)
    assert not any("WRONG" in n for n in r.notes)
    full = r.find("polybus", 2, "bytes_sent", {"n": 200, "mode": "stateless"})
    state = r.find("polybus", 2, "bytes_sent", {"n": 200, "mode": "stateful"})
    assert full is not None and state is not None
    assert state.median < full.median / 10
