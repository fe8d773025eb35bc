"""The summary `polybus run` prints on stderr, as a log file or a pipe gets it."""

from __future__ import annotations

import builtins
import io

import pytest
from rich.console import Console

from polybus.cli.cmd_run import caption, strategies, summary
from polybus.cli.output import result_console
from polybus.client.stats import ReplicaStats
from polybus.runner import RunResult


def test_replica_names_and_totals_are_whole_at_80_columns() -> None:
    # Workers started by hand are named module-host-pid; cut to "server-…" two of them
    # could not be told apart, and the totals line broke in the middle of a figure.
    names = ["server-buildhost-123456", "server-buildhost-123457"]
    r = RunResult(None, 0.5, 1.0, 2, 160_166, 160_244,
                  [ReplicaStats(n, calls=1, busy_s=0.1) for n in names])
    out = io.StringIO()
    Console(file=out, width=80).print(summary(r))
    for n in names:
        assert n in out.getvalue()
    assert caption(r) == ("elapsed 0.5000 s (start-up 1.00 s apart), 2 calls, "
                          "sent 160,166 B, received 160,244 B")


def test_a_name_too_long_for_80_columns_is_whole_in_a_log_file() -> None:
    """`polybus run ... 2> log`: stderr is not a terminal, and the table is not cut."""
    name = "server-" + "a-very-long-host-name-of-a-build-farm-machine-" * 2 + "4242"
    r = RunResult(None, 0.5, 1.0, 1, 10, 10,
                  [ReplicaStats(name, calls=1, busy_s=0.1, lost=True)])
    out = io.StringIO()
    result_console(out).print(summary(r))
    assert name in out.getvalue() and "(lost)" in out.getvalue()
    assert "\u2026" not in out.getvalue()


def test_one_call_is_not_one_calls() -> None:
    r = RunResult(None, 0.5, 1.0, 1, 10, 20, [ReplicaStats("server-0", calls=1, busy_s=0.1)])
    assert caption(r) == ("elapsed 0.5000 s (start-up 1.00 s apart), 1 call, "
                          "sent 10 B, received 20 B")


def _row(**counts: int) -> dict[str, int]:
    row = {"calls": 10, "batches": 0, "batched_calls": 0, "operands_put": 0,
           "operands_named": 0, "cache_misses": 0, "forwarded": 0, "through_client": 0,
           "refused": 0, "cancelled": 0, "run_again": 0}
    row.update(counts)
    return row


def test_strategy_lines_say_only_the_non_zero_counts() -> None:
    r = RunResult(None, 0.5, 1.0, 30, 10, 20, [],
                  {"client.make": _row(forwarded=3, through_client=1),
                   "client.mul": _row(operands_put=1, operands_named=9, cache_misses=1),
                   "client.echo": _row(batches=1, batched_calls=10, refused=2),
                   "client.drop": _row(cancelled=4),
                   "client.plain": _row()},
                  {"values": 1, "puts": 2})
    assert strategies(r) == [
        "client.make: 3 forwarded, 1 through the client",
        "client.mul: 1 operand put, 9 named, 1 cache miss",
        "client.echo: 1 batch (10 calls), 2 refused (queue full)",
        "client.drop: 4 cancelled",
        "broadcast: 1 value, 2 Puts to replicas"]


def test_a_run_with_no_strategy_on_says_nothing_more() -> None:
    r = RunResult(None, 0.5, 1.0, 10, 10, 20, [], {"client.f": _row()},
                  {"values": 0, "puts": 0})
    assert strategies(r) == []
    assert strategies(RunResult(None, 0.5, 1.0, 1, 10, 20)) == []  # (made by hand)


def test_json_gives_each_binding_its_counts_beside_the_fields_it_had() -> None:
    r = RunResult(None, 0.5, 1.0, 10, 10, 20, [], {"client.f": _row(batches=2)},
                  {"values": 0, "puts": 0})
    d = r.to_json()
    assert {"result", "elapsed_s", "startup_s", "calls", "bytes_sent", "bytes_received",
            "replicas"} < set(d)
    assert d["interfaces"] == {"client.f": _row(batches=2)}
    assert d["broadcasts"] == {"values": 0, "puts": 0}


def test_operands_named_with_none_put_say_operands() -> None:
    r = RunResult(None, 0.5, 1.0, 4, 10, 20, [],
                  {"client.mul": _row(operands_named=4), "client.one": _row(operands_named=1)},
                  {"values": 0, "puts": 0})
    assert strategies(r) == ["client.mul: 4 operands named", "client.one: 1 operand named"]


def test_a_run_result_gives_its_summary_as_text_from_python(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`polybus.run` prints no summary; `r.summary()` is the one `polybus run` writes,
    as plain text, in a notebook too (where rich would display it, not return it)."""

    class ZMQInteractiveShell:  # (the name by which rich knows a notebook's kernel)
        pass

    monkeypatch.setattr(builtins, "get_ipython", ZMQInteractiveShell, raising=False)
    r = RunResult(None, 0.5, 1.0, 30, 10, 20,
                  [ReplicaStats("server-0", calls=20, busy_s=0.25, busy_fraction=0.5),
                   ReplicaStats("server-1", calls=10, busy_s=None, lost=True)],
                  {"client.make": _row(forwarded=3)})
    text = r.summary()
    lines = text.splitlines()
    assert "replica" in lines[1] and "busy %" in lines[1], text
    assert any("server-0" in x and "0.2500" in x and "50" in x for x in lines), text
    assert any("server-1 (lost)" in x and "?" in x for x in lines), text
    assert lines[-2:] == [caption(r), "client.make: 3 forwarded"]
    assert "\x1b[" not in text


def test_a_pool_is_said_beside_the_busy_share_it_divides() -> None:
    """busy % is of a replica's handlers' time: 44% of a pool of 2 read as half idle
    with the pool nowhere in the table. A column says it when a replica has a pool."""
    pooled = RunResult(None, 1.0, 1.0, 2, 10, 10,
                       [ReplicaStats("server-0", calls=2, busy_s=0.88, handlers=2,
                                     busy_fraction=0.44)])
    out = io.StringIO()
    Console(file=out, width=120).print(summary(pooled))
    head, row = [ln for ln in out.getvalue().splitlines() if "pool" in ln or "server-0" in ln]
    assert head.split("┃")[4].strip() == "pool" and row.split("│")[4].strip() == "2"
    plain = RunResult(None, 1.0, 1.0, 2, 10, 10, [ReplicaStats("server-0", calls=2)])
    out = io.StringIO()
    Console(file=out, width=120).print(summary(plain))
    assert "pool" not in out.getvalue()  # (one handler each: nothing to say)


def _columns(r: RunResult) -> tuple[list[str], dict[str, list[str]]]:
    """The summary's header and each replica's row, as cells."""
    out = io.StringIO()
    Console(file=out, width=200).print(summary(r))
    lines = out.getvalue().splitlines()
    head = [c.strip() for c in next(x for x in lines if "replica" in x).split("┃")[1:-1]]
    rows = {cells[0]: cells for x in lines if "│" in x
            for cells in [[c.strip() for c in x.split("│")[1:-1]]]}
    return head, rows


def test_a_replica_on_another_host_is_said_with_its_host_and_a_local_run_is_unchanged() -> None:
    """Workers started by hand at a registry: nothing said which host served what. A
    `host` column says it when a replica is not on this one; one here says `here`."""
    here = [ReplicaStats("server-0", calls=2, transports=["shm"],
                         addresses=["shm:///tmp/polybus-1-x/1.shm"]),
            ReplicaStats("server-1", calls=2, transports=["tcp"],
                         addresses=["tcp://127.0.0.1:40001"])]
    head, rows = _columns(RunResult(None, 1.0, 1.0, 4, 10, 10, here))
    assert head[:3] == ["replica", "via", "speed"], head  # (as ever: nothing to say)
    away = ReplicaStats("server-2", calls=3, transports=["tcp"],
                        addresses=["tcp://198.51.100.7:7000"])  # (TEST-NET-2: no host's)
    head, rows = _columns(RunResult(None, 1.0, 1.0, 7, 10, 10, [*here, away]))
    assert head[:4] == ["replica", "host", "via", "speed"], head
    assert rows["server-2"][1:3] == ["198.51.100.7", "tcp"], rows
    assert rows["server-0"][1] == rows["server-1"][1] == "here", rows


def test_json_gives_each_replica_the_address_of_each_of_its_connections() -> None:
    rep = ReplicaStats("server-0", calls=1, transports=["shm", "tcp"],
                       addresses=["shm:///tmp/p/1.shm", "tcp://127.0.0.1:40001"])
    [row] = RunResult(None, 1.0, 1.0, 1, 10, 10, [rep]).to_json()["replicas"]
    assert row["addresses"] == ["shm:///tmp/p/1.shm", "tcp://127.0.0.1:40001"]
    assert row["transports"] == ["shm", "tcp"]
