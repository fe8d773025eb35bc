"""The mandelbrot bench's load ratios give each share to the replica it is meant for.

A load ratio's shares follow the replicas in the order the configuration lists them
(client/session.py); the bench once wrote them in name order, so "ratio right" put
the fastest replica's share on another and measured 2x the lower bound. And every
figure it records is the median of its repetitions, each server alone too."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from polybus.bench import b_mandelbrot
from polybus.bench._balance import SPEEDS, replicas
from polybus.bench.b_mandelbrot import strategies
from polybus.bench.progress import NullProgress
from polybus.config.replication import parse_replication


def _shares(overrides: tuple[str, ...]) -> list[float]:
    ratio = next(o for o in overrides if ".loadratio=" in o).split("=", 1)[1]
    return [float(x) for x in ratio.split(":")]


def test_ratio_right_gives_each_replica_its_own_speed() -> None:
    configured, _ = parse_replication(replicas(), "server")
    shares = _shares(strategies()["ratio right"])
    assert [r.name for r in configured] == list(SPEEDS)
    assert shares == [r.speed for r in configured]


def test_ratio_wrong_is_off_by_two_for_every_replica() -> None:
    configured, _ = parse_replication(replicas(), "server")
    shares = _shares(strategies()["ratio 2x wrong"])
    assert sorted(s / r.speed for s, r in zip(shares, configured, strict=True)) == [
        0.5, 0.5, 2.0, 2.0]


class _Harness:
    """Stands in for the cluster: counts the runs of each strategy, answers rightly, and
    returns a made-up time that differs from run to run (nothing is timed)."""

    def __init__(self, replication: str) -> None:
        self.runs: Counter[tuple[str, ...]] = Counter()

    def run(self, entry: str, args: Any, overrides: tuple[str, ...] = ()
            ) -> tuple[float, int, Any]:
        self.runs[overrides] += 1
        stats = SimpleNamespace(replicas=[SimpleNamespace(migrated_in=0)])
        return 1.0 + 0.01 * self.runs[overrides], sum(range(200)), stats

    def __enter__(self) -> _Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_every_figure_is_the_median_of_the_runs_repetitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (a), each server alone, was run once while (b) ran `reps` times: its rows were
    # single measurements (n=1) under params "reps": 3, and so the ratio made from them
    monkeypatch.setattr(b_mandelbrot, "Harness", _Harness)
    result = b_mandelbrot.run(quick=False, progress=NullProgress())
    reps = result.params["reps"]
    assert reps > 1
    assert {r.n for r in result.rows} == {reps}
    alone = [r for r in result.rows if r.x == 1 and r.metric == "seconds"]
    assert len(alone) == 2 * len(SPEEDS) and all(r.min < r.max for r in alone)
