"""The configuration is the only switch: same modules, same answer, every strategy."""

from __future__ import annotations

from typing import Any

import pytest

import polybus
from integration.conftest import ROOT

CALC = ROOT / "tests" / "integration" / "apps" / "calc" / "app.toml"
IFACES = ("square", "scale", "describe", "echo", "pair")


def overrides(style: str, replicas: int) -> dict[str, Any]:
    out: dict[str, Any] = {"modules.server.replication": replicas}
    for name in IFACES:
        out[f"modules.client.use.{name}.callstyle"] = style
    return out


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, int], Any]:
    out = {}
    for replicas in (1, 3):
        for style in ("sync", "async", "async-demand(3)"):
            r = polybus.run(CALC, overrides(style, replicas))
            out[(style, replicas)] = r
    return out


def test_same_answer_under_every_call_style_and_replication(results: dict[tuple[str, int], Any]) -> None:
    answers = {k: r.result for k, r in results.items()}
    reference = answers[("sync", 1)]
    for key, answer in answers.items():
        assert answer == reference, key
    assert reference["total"] == sum(i * i for i in range(12))
    assert reference["same"] is True          # numpy arrays of several dtypes came back intact
    assert reference["nested"] == 81 and reference["texts"] == "16|25|5"
    assert reference["empty"] == [0, 4] and reference["scaled0d"] == 5.0
    assert reference["counted"] == {"a": 5, "b": 1}  # (Counter.update took a promise)


def test_every_replica_serves_and_stats_add_up(results: dict[tuple[str, int], Any]) -> None:
    for (_style, replicas), r in results.items():
        assert [rep.name for rep in r.replicas] == [f"server-{i}" for i in range(replicas)]
        assert sum(rep.calls for rep in r.replicas) == r.calls
        assert all(rep.calls > 0 for rep in r.replicas)
        assert r.bytes_sent > 0 and r.bytes_received > 0 and r.elapsed_s > 0


@pytest.mark.parametrize(("style", "replicas"), [("sync", 1), ("sync", 3), ("async", 2)])
def test_calls_from_several_client_threads_get_their_own_answers(style: str, replicas: int) -> None:
    sets = overrides(style, replicas)
    sets["modules.client.entrypoint"] = "threads"
    sets["modules.client.args"] = [4, 150]
    r = polybus.run(CALC, sets)
    assert r.result is True
    assert r.calls == 4 * 150
