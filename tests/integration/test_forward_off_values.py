"""``forward = false``: what a call waiting at the client for its promises' values
sends, and its priority (client/awaiting.py). From a review of the change that made
such calls return at once: the call sent the producer's value as it was when the call
was placed, after the program had changed it in place (400.0 for 4.0); and a priority
over a large bytes argument failed the call (computed from its travelling form)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus

from . import comm_harness
from .comm_harness import Cluster

SERVER = '''
import threading

import numpy as np

GATE = threading.Event()


def fast(n):
    return np.ones(n)


def slow(x):
    if not GATE.wait(20):
        raise TimeoutError("the test never opened the gate")
    return x


def add(a, b):
    return float(a.sum()) + b


def g(x, data):
    return [x, len(data)]
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.fast = {{}}
define.slow = {{ pool = 4 }}
define.add = {{}}
define.g = {{ priority = "len(data)" }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.fast = {{ callstyle = "async", forward = {fwd} }}
use.slow = {{ callstyle = "async", forward = {fwd} }}
use.add = {{ callstyle = "async", forward = {fwd} }}
use.g = {{ callstyle = "async-demand(1)", forward = {fwd} }}

[bind]
"client.fast" = "server.fast"
"client.slow" = "server.slow"
"client.add" = "server.add"
"client.g" = "server.g"
"""


@pytest.fixture(params=["false", "true"])
def cluster_(request: pytest.FixtureRequest, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, object]]:
    monkeypatch.setattr(comm_harness, "SERVER", textwrap.dedent(SERVER))
    c = Cluster(tmp_path, textwrap.dedent(TOML.format(fwd=request.param)), replicas=2)
    gate = c.functions["slow"].__globals__["GATE"]
    try:
        yield c, gate
    finally:
        gate.set()
        c.close()


def test_a_value_the_program_changes_after_its_answer_goes_as_answered(
        cluster_: tuple[Cluster, object]) -> None:
    c, gate = cluster_
    c.session()
    fast, slow, add = polybus.use("fast"), polybus.use("slow"), polybus.use("add")
    p = fast(4)
    q = slow(0.0)
    r = add(p, q)  # made while p and q are unanswered
    a = polybus.wait(p)  # the program uses p's value...
    a *= 100  # ...and changes it in place (its own business)
    gate.set()  # type: ignore[attr-defined]
    assert polybus.wait(r) == 4.0


def test_a_priority_over_a_large_bytes_argument_is_computed_from_the_bytes(
        cluster_: tuple[Cluster, object]) -> None:
    c, gate = cluster_
    c.session()
    fast, slow, g = polybus.use("fast"), polybus.use("slow"), polybus.use("g")
    data = b"\x07" * 100_000  # (travels out of band: not a bytes object until sent)
    r = g(slow(1), data)
    gate.set()  # type: ignore[attr-defined]
    assert polybus.wait(r) == [1, 100_000]
    assert polybus.wait(g(fast(2), data))[1] == 100_000


def test_a_wait_for_a_call_still_at_the_client_looks_before_it_reads(
        cluster_: tuple[Cluster, object], monkeypatch: pytest.MonkeyPatch) -> None:
    # A consumer whose producer was given up on (failed outside a read) waited for an
    # unrelated message, or for the heartbeat's silence (up to 20 s), before the look
    # that fails it: the look now comes first, and no read is needed.
    from polybus.client.calls import CallRecord
    from polybus.errors import CallTimeoutError

    c, _ = cluster_
    s = c.session()
    r = s.reactor
    rec = CallRecord(10**9, s.dispatchers["add"], [], None, 0.0)  # (never placed)
    looked: list[bool] = []

    def after_step() -> None:  # (what the look would find: its producer failed)
        looked.append(True)
        rec.set_error(CallTimeoutError("upstream gone", interface="add"))

    def step(*_: object) -> None:
        raise AssertionError("the wait read before it looked")

    monkeypatch.setattr(r, "after_step", after_step)
    monkeypatch.setattr(r, "_step", step)
    with pytest.raises(CallTimeoutError, match="upstream gone"):
        r._wait(rec)
    assert looked == [True]
