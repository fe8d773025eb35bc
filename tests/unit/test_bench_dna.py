"""bench dna's rows say in their config whether their work was modelled or real.

The FIFO/priority rows sleep each query's cost (modelled); the pipeline rows run the
real search of examples/dna. Only a note said "work modelled as time", for all of them
(no processes here: the cluster and the runs are stand-ins, nothing is timed).
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

import polybus
from polybus.bench import b_dna
from polybus.bench.progress import NullProgress


class _Harness:
    """The modelled cluster: answers each search rightly, in a made-up time."""

    def __init__(self, replication: str) -> None:
        self.runs: Counter[tuple[str, ...]] = Counter()

    def run(self, entry: str, args: Any, overrides: tuple[str, ...] = ()
            ) -> tuple[float, int, Any]:
        self.runs[overrides] += 1
        queries = args[0]
        return 1.0 + 0.01 * self.runs[overrides], sum(len(q) for q in queries), None

    def __enter__(self) -> _Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_every_row_says_whether_its_work_was_modelled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(b_dna, "Harness", _Harness)
    sent = iter(range(1000, 100000, 1000))
    monkeypatch.setattr(polybus, "run", lambda toml, sets: SimpleNamespace(
        elapsed_s=0.5, bytes_sent=next(sent), bytes_received=10, result=[1, 2]))
    result = b_dna.run(quick=True, progress=NullProgress())
    models = {(r.config["dispatch"], r.config.get("model")) for r in result.rows}
    assert models == {("demand-driven", "sleep"), ("stealing", "sleep"), ("pipeline", "real")}
