"""The mandelbrot bench's load ratios give each share to the replica it is meant for.

A load ratio's shares follow the replicas in the order the configuration lists them
(client/session.py); the bench once wrote them in name order, so "ratio right" put
the fastest replica's share on another and measured 2x the lower bound."""

from __future__ import annotations

from polybus.bench._balance import SPEEDS, replicas
from polybus.bench.b_mandelbrot import strategies
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
