"""The run's report counts what each binding's strategies did (client/counts.py): each
count moves with its strategy on, and stays 0 for the same calls with it off."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from integration.conftest import cli
from polybus.errors import BusyError
from polybus.testing.apps import write_bound_app

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1
{define}

[modules.client]
source = "client.py"
entrypoint = "main"
{use}

[bind]
"client.echo" = "server.echo"
"client.mul" = "server.mul"
"client.nap" = "server.nap"
"client.slow_double" = "server.slow_double"
"client.double" = "server.double"
"""


def _counts(tmp_path: Path, define: str, use: str, program: Any, replicas: int = 1
            ) -> dict[str, dict[str, int]]:
    """Each binding's counts after ``program(session)`` ran on an in-process cluster."""
    tmp_path.mkdir(exist_ok=True)
    with cluster(tmp_path, TOML.format(define=_define(define), use=use),
                 replicas=replicas) as c:
        s = c.session()
        program(s)
        return s.stats().interfaces


def _define(given: str) -> str:
    """``given`` (``define.X = {...}`` lines) and a define for each other bound interface
    (a module with a define table serves only those it lists), of the same queue bound
    (a replica's queue takes the largest)."""
    names = ("echo", "mul", "nap", "slow_double", "double")
    rest = "{ queue = 1 }" if "queue = 1" in given else "{}"
    return given + "\n" + "\n".join(f"define.{n} = {rest}" for n in names
                                      if f"define.{n} " not in given)


def _nothing_but_calls(row: dict[str, int]) -> bool:
    return all(v == 0 for k, v in row.items() if k != "calls")


def test_aggregate_counts_batches_and_their_calls(tmp_path: Path) -> None:
    def program(s: Any) -> None:
        assert [polybus.wait(p) for p in [s.call("echo", (i,), {}) for i in range(50)]] \
            == list(range(50))

    on = _counts(tmp_path / "on", "", 'use.echo = { callstyle = "async", aggregate = 10, '
                 'linger = "30s" }', program)
    assert on["client.echo"]["calls"] == 50
    assert on["client.echo"]["batches"] == 5 and on["client.echo"]["batched_calls"] == 50
    off = _counts(tmp_path / "off", "", 'use.echo = { callstyle = "async" }', program)
    assert off["client.echo"]["calls"] == 50 and _nothing_but_calls(off["client.echo"])


def test_cache_counts_one_put_and_the_rest_named(tmp_path: Path) -> None:
    b = np.arange(16.0).reshape(4, 4)

    def program(s: Any) -> None:
        row = np.ones(4)
        got = [polybus.wait(p) for p in [s.call("mul", (row, b), {}) for _ in range(10)]]
        assert all(np.array_equal(g, row @ b) for g in got)

    on = _counts(tmp_path / "on", 'define.mul = { cache = ["b"] }',
                 'use.mul = { callstyle = "async" }', program)
    assert on["client.mul"]["operands_put"] == 1
    assert on["client.mul"]["operands_named"] == 9
    assert on["client.mul"]["cache_misses"] == 0
    off = _counts(tmp_path / "off", "", 'use.mul = { callstyle = "async" }', program)
    assert _nothing_but_calls(off["client.mul"])


def _pipeline(s: Any) -> None:
    """Two stages: the producer takes 0.5 s, its consumer is made at once."""
    outs = [s.call("double", (s.call("slow_double", (i, 0.5), {}),), {}) for i in range(2)]
    assert [polybus.wait(p) for p in outs] == [0, 4]


def test_forwarding_counts_values_sent_replica_to_replica(tmp_path: Path) -> None:
    use = ('use.slow_double = {{ callstyle = "async" }}\n'
           'use.double = {{ callstyle = "async", forward = {} }}')
    on = _counts(tmp_path / "on", "", use.format("true"), _pipeline, replicas=2)
    assert on["client.slow_double"]["forwarded"] == 2
    assert on["client.slow_double"]["through_client"] == 0
    assert _nothing_but_calls(on["client.double"])  # (counted under the producer)
    off = _counts(tmp_path / "off", "", use.format("false"), _pipeline, replicas=2)
    assert off["client.slow_double"]["forwarded"] == 0
    assert off["client.slow_double"]["through_client"] == 2


def test_a_promise_answered_before_its_consumer_goes_through_the_client(
        tmp_path: Path) -> None:
    def program(s: Any) -> None:
        p = s.call("double", (3,), {})
        polybus.wait(p)
        assert polybus.wait(s.call("double", (p,), {})) == 12

    got = _counts(tmp_path, "", 'use.double = { callstyle = "async" }', program)
    assert got["client.double"]["through_client"] == 1
    assert got["client.double"]["forwarded"] == 0


def _refusals(s: Any) -> int:
    """Six 0.3 s calls on one replica at once: how many were refused (BusyError)."""
    refused = 0
    for p in [s.call("nap", (i, 0.3), {}) for i in range(6)]:
        try:
            polybus.wait(p)
        except BusyError:
            refused += 1
    return refused


def test_refused_counts_the_busy_errors_the_program_saw(tmp_path: Path) -> None:
    seen: list[int] = []
    on = _counts(tmp_path / "on", 'define.nap = { queue = 1, overflow = "reject" }',
                 'use.nap = { callstyle = "async" }', lambda s: seen.append(_refusals(s)))
    assert seen[0] >= 1 and on["client.nap"]["refused"] == seen[0]
    off = _counts(tmp_path / "off", "define.nap = { queue = 1 }",
                  'use.nap = { callstyle = "async" }', lambda s: seen.append(_refusals(s)))
    assert seen[1] == 0 and _nothing_but_calls(off["client.nap"])


def test_a_refused_batch_counts_each_of_its_calls(tmp_path: Path) -> None:
    seen: list[int] = []
    got = _counts(tmp_path, 'define.nap = { queue = 1, overflow = "reject" }',
                  'use.nap = { callstyle = "async", aggregate = 2, linger = "30s" }',
                  lambda s: seen.append(_refusals(s)))
    assert seen[0] >= 2 and got["client.nap"]["refused"] == seen[0]
    assert got["client.nap"]["batches"] == 3


def test_broadcast_counts_its_values_and_puts(tmp_path: Path) -> None:
    b = np.arange(16.0).reshape(4, 4)
    with cluster(tmp_path, TOML.format(define=_define(""),
                                       use='use.mul = { callstyle = "async" }'),
                 replicas=2) as c:
        s = c.session()
        assert s.stats().broadcasts == {"values": 0, "puts": 0}
        h = polybus.broadcast(b)
        polybus.broadcast(b)  # (held there already: no Put)
        for p in [s.call("mul", (np.ones(4), h), {}) for _ in range(4)]:
            polybus.wait(p)
        stats = s.stats()
    assert stats.broadcasts == {"values": 2, "puts": 2}
    assert stats.interfaces["client.mul"]["operands_named"] == 4
    assert stats.interfaces["client.mul"]["operands_put"] == 0


SERVER = "def echo(x):\n    return x\n"
CLIENT = """
from polybus import use, wait

echo = use("echo")

def main():
    return sum(wait(p) for p in [echo(i) for i in range(20)])
"""


@pytest.mark.timeout(120)
def test_run_reports_the_counts_in_json_and_only_the_non_zero_in_its_summary(
        tmp_path: Path) -> None:
    write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("echo",),
                    server_keys="replication = 1",
                    client_keys='use.echo = { callstyle = "async", aggregate = 5, '
                                'linger = "30s" }')
    p = cli("run", "app.toml", "--json", "on.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "on.json").read_text())
    assert data["interfaces"]["client.echo"] == {
        "calls": 20, "batches": 4, "batched_calls": 20, "operands_put": 0,
        "operands_named": 0, "cache_misses": 0, "forwarded": 0, "through_client": 0,
        "refused": 0, "cancelled": 0, "run_again": 0}
    assert data["broadcasts"] == {"values": 0, "puts": 0}
    assert "client.echo: 4 batches (20 calls)\n" in p.stderr, p.stderr
    off = tmp_path / "off"
    write_bound_app(off, server=SERVER, client=CLIENT, names=("echo",),
                    server_keys="replication = 1",
                    client_keys='use.echo = { callstyle = "async" }')
    p = cli("run", "app.toml", "--json", "off.json", cwd=off)
    assert p.returncode == 0, p.stderr
    assert _nothing_but_calls(json.loads((off / "off.json").read_text())["interfaces"][
        "client.echo"])
    assert "client.echo:" not in p.stderr and "broadcast:" not in p.stderr, p.stderr


def test_promises_inside_a_list_count_each_value_through_the_client(
        tmp_path: Path) -> None:
    def program(s: Any) -> None:
        p, q = s.call("double", (3,), {}), s.call("double", (4,), {})
        polybus.wait(p), polybus.wait(q)
        assert polybus.wait(s.call("echo", ([p, {"q": q}],), {})) == [6, {"q": 8}]

    got = _counts(tmp_path, "", 'use.double = { callstyle = "async" }\n'
                  'use.echo = { callstyle = "async" }', program)
    assert got["client.double"]["through_client"] == 2


def test_a_sync_call_its_lane_leaves_to_the_general_path_counts_its_promise_once(
        tmp_path: Path) -> None:
    """The lane wires the arguments, finds the reactor busy (another thread holds it)
    and leaves the call to the general path, which wires them again: one value passed
    once is one count."""
    def program(s: Any) -> None:
        p = s.call("double", (3,), {})
        polybus.wait(p)
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with s.reactor._lock:
                holding.set()
                release.wait(10)

        t = threading.Thread(target=hold, daemon=True)
        t.start()
        assert holding.wait(10)
        timer = threading.Timer(0.3, release.set)
        timer.start()
        try:
            assert polybus.wait(s.call("echo", (p,), {})) == 6
        finally:
            release.set()
            timer.cancel()
            t.join(10)

    got = _counts(tmp_path, "", 'use.double = { callstyle = "async" }\n'
                  'use.echo = { callstyle = "sync" }', program)
    assert got["client.double"]["through_client"] == 1


def test_aggregate_on_the_general_path_counts_batches_and_their_calls(
        tmp_path: Path) -> None:
    """A binding with a priority aggregates on the general path (held calls packed into
    a Batch at each flush): counted there, and a binding that does not aggregate is not."""
    def program(s: Any) -> None:
        ps = [s.call("echo", (i,), {}) for i in range(50)]
        qs = [s.call("double", (i,), {}) for i in range(5)]
        assert [polybus.wait(p) for p in ps] == list(range(50))
        assert [polybus.wait(q) for q in qs] == [2 * i for i in range(5)]

    got = _counts(tmp_path, 'define.echo = { priority = "x" }',
                  'use.echo = { callstyle = "async", aggregate = 10, linger = "30s" }\n'
                  'use.double = { callstyle = "async-demand(2)" }', program)
    assert got["client.echo"]["batches"] == 5 and got["client.echo"]["batched_calls"] == 50
    assert _nothing_but_calls(got["client.double"])
