"""``use.<iface>.forward = false``: a promise passed as an argument is not forwarded, and
the consuming call still returns its promise at once (client/awaiting.py).

The producer's value comes to the client and the consuming call is sent from there once
it has come: the program never waits at the consuming call, so the stages of a pipeline
overlap as with forwarding on, and a failure upstream fails the consumer's promise with
the typed error the forwarding path gives. The producers here wait on an event the test
opens (``gate``), so "the call returned before the producer answered" is a fact of the
run, not of timing.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.errors import CallTimeoutError, ConnectionLostError, RemoteException

from . import comm_harness
from .comm_harness import Cluster, cluster

SERVER = '''
import threading

GATE = threading.Event()  # the test opens it: gated calls answer only then
HOLD = threading.Event()  # and this one: held calls answer only then


def gated(x):
    if not GATE.wait(20):
        raise TimeoutError("the test never opened the gate")
    if x < 0:
        raise ValueError(f"negative {x}")
    return x * 2


def held(x):
    if not HOLD.wait(20):
        raise TimeoutError("the test never let the held calls go")
    return x


def inc(x):
    return x + 1


def tag(x, t):
    return [x, t]


def add(x, y):
    return x + y
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.gated = {{ pool = 16 }}
define.held = {{ pool = 16 }}
define.inc = {{}}
define.tag = {{}}
define.add = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated = {{ callstyle = "async"{gated} }}
use.held = {{ callstyle = "{style}", forward = {fwd}{held} }}
use.inc = {{ callstyle = "{style}", forward = {fwd}{inc} }}
use.tag = {{ callstyle = "{style}", forward = {tag_fwd} }}
use.add = {{ callstyle = "{style}", forward = {fwd} }}

[bind]
"client.gated" = "server.gated"
"client.held" = "server.held"
"client.inc" = "server.inc"
"client.tag" = "server.tag"
"client.add" = "server.add"
"""


def toml(style: str = "async", fwd: bool = False, tag_fwd: bool | None = None,
         gated: str = "", held: str = "", inc: str = "") -> str:
    """The configuration; ``gated``, ``held``, ``inc``: more keys of those bindings."""
    low = str(fwd).lower()
    return TOML.format(style=style, fwd=low, tag_fwd=low if tag_fwd is None else
                       str(tag_fwd).lower(), gated=gated, held=held, inc=inc)


Gates = Callable[[Path, str], AbstractContextManager[tuple[Cluster, threading.Event,
                                                          threading.Event]]]


@pytest.fixture
def gates(monkeypatch: pytest.MonkeyPatch) -> Gates:
    """``gates(tmp, text)``: a cluster of 2 replicas of SERVER and its two events (the
    replicas run in this process, with the module loaded once); both are opened before
    it stops, so no handler waits on."""
    monkeypatch.setattr(comm_harness, "SERVER", SERVER)
    return _gates


@contextmanager
def _gates(tmp: Path, text: str) -> Iterator[tuple[Cluster, threading.Event, threading.Event]]:
    with cluster(tmp, text, replicas=2) as c:
        gate = c.functions["gated"].__globals__["GATE"]
        hold = c.functions["held"].__globals__["HOLD"]
        try:
            yield c, gate, hold
        finally:
            gate.set()
            hold.set()


def forwarded(c: Cluster) -> int:
    """Values the replicas sent replica to replica."""
    return sum(rt.forwarding.forwarded for rt in c.runtimes)


@pytest.mark.parametrize("style", ["async", "async-demand(1)", "async-demand(auto)"])
def test_the_consuming_call_returns_before_its_producer_answers(
        tmp_path: Path, gates: Gates, style: str) -> None:
    with gates(tmp_path, toml(style)) as (c, gate, _):
        s = c.session()
        p1 = s.call("gated", (1,), {})
        p2 = s.call("inc", (p1,), {})  # returned: p1 cannot answer before the gate opens
        assert not p1.done and not p2.done
        gate.set()
        assert polybus.wait(p2) == 3 and polybus.wait(p1) == 2
        assert forwarded(c) == 0  # the value came to the client and went on from there


@pytest.mark.parametrize("tag_fwd", [False, True])
@pytest.mark.parametrize("style", ["async", "async-demand(1)"])
def test_a_pipeline_never_waits_at_its_calls_and_keeps_its_results_in_order(
        tmp_path: Path, gates: Gates, style: str, tag_fwd: bool) -> None:
    # Three stages; the third forwards or not: given the promise of a binding that does
    # not forward its answers, a forwarding call waits at the client as well.
    items = list(range(12))
    with gates(tmp_path, toml(style, tag_fwd=tag_fwd)) as (c, gate, _):
        s = c.session()
        outs = [s.call("tag", (s.call("inc", (s.call("gated", (x,), {}),), {}), x), {})
                for x in items]
        assert not any(o.done for o in outs)  # every call made, the gate still shut
        gate.set()
        assert [polybus.wait(o) for o in outs] == [[2 * x + 1, x] for x in items]
        done = list(polybus.as_completed(outs, timeout=30))
        assert len(done) == len(items)
        assert forwarded(c) == 0


def test_a_forwarding_call_given_a_promise_not_forwarded_waits_at_the_client_too(
        tmp_path: Path, gates: Gates) -> None:
    # gated's answers are not forwarded (forward = false on it): inc, which forwards,
    # waits at the client for gated's value; tag, which forwards too, is sent at once
    # and gets inc's value replica to replica once inc is placed (or its failure).
    with gates(tmp_path, toml(fwd=True, gated=", forward = false")) as (c, gate, _):
        s = c.session()
        ps = [s.call("gated", (x,), {}) for x in (1, -1, 2)]
        outs = [s.call("tag", (s.call("inc", (p,), {}), 0), {}) for p in ps]
        assert not any(o.done for o in outs)
        assert s.forwarder.forwarded == 3  # type: ignore[attr-defined]  # (inc -> tag)
        gate.set()
        assert polybus.wait(outs[0]) == [3, 0] and polybus.wait(outs[2]) == [5, 0]
        with pytest.raises(RemoteException) as err:
            polybus.wait(outs[1])
        assert err.value.remote_message == "an upstream call failed: negative -1"
        where = ps[1]._rec.link.name
        assert f"(raised in gated on {where}, upstream of inc, upstream of tag on " \
            in str(err.value).splitlines()[0], err.value


def test_calls_waiting_at_the_client_are_placed_while_the_program_computes(
        tmp_path: Path, gates: Gates) -> None:
    # The program makes its calls, opens the gate and computes (outside polybus): the
    # pump places the consumers meanwhile, so they are answered before it next waits.
    with gates(tmp_path, toml()) as (c, gate, _):
        c.session()
        gated, inc = polybus.use("gated"), polybus.use("inc")  # (as a program calls)
        outs = [inc(gated(x)) for x in range(4)]
        gate.set()
        runtimes_calls = 0
        deadline = time.monotonic() + 30
        while runtimes_calls < 8 and time.monotonic() < deadline:  # (the program computes)
            runtimes_calls = sum(rt.calls for rt in c.runtimes)
            time.sleep(0.01)
        assert runtimes_calls == 8  # 4 producers and their 4 consumers, none waited for
        assert [polybus.wait(o) for o in outs] == [2 * x + 1 for x in range(4)]


def test_a_waiting_call_sends_its_other_arguments_as_they_were_when_it_was_made(
        tmp_path: Path, gates: Gates) -> None:
    with gates(tmp_path, toml()) as (c, gate, _):
        s = c.session()
        x = np.zeros(4)
        q = s.call("add", (s.call("gated", (1,), {}), x), {})
        x[:] = 5.0  # (after the call: not what it sends)
        gate.set()
        assert np.array_equal(polybus.wait(q), np.full(4, 2.0))


def upstream(err: RemoteException, producer: Any) -> None:
    """``err`` is the consumer's error for ``producer``'s ValueError("negative -1"), as
    forwarding gives it."""
    where = producer._rec.link.name
    assert err.remote_type == "ValueError"
    assert err.remote_message == "an upstream call failed: negative -1"
    assert err.origin == f"gated on {where}"
    assert err.interface == "inc"
    assert "ValueError: negative -1" in err.remote_traceback  # the producer's frames
    assert f"(raised in gated on {where}, upstream of inc" in str(err).splitlines()[0]


@pytest.mark.parametrize("fwd", [True, False])
def test_an_upstream_failure_fails_the_consumers_promise_as_forwarding_does(
        tmp_path: Path, gates: Gates, fwd: bool) -> None:
    with gates(tmp_path, toml(fwd=fwd)) as (c, gate, _):
        s = c.session()
        p1 = s.call("gated", (-1,), {})
        p2 = s.call("inc", (p1,), {})  # no error here: it is the promise's
        gate.set()
        with pytest.raises(RemoteException) as err:
            polybus.wait(p2)
        upstream(err.value, p1)
        consumer = p2._rec.link
        assert (consumer is not None) == fwd  # (unforwarded: it never reached a replica)
        assert err.value.replica == (consumer.name if consumer is not None else "")
        with pytest.raises(RemoteException) as own:
            polybus.wait(p1)
        assert own.value.remote_message == "negative -1"


def test_a_producer_failed_before_the_consuming_call_fails_its_promise_not_the_call(
        tmp_path: Path, gates: Gates) -> None:
    with gates(tmp_path, toml()) as (c, gate, _):
        s = c.session()
        gate.set()
        p1 = s.call("gated", (-1,), {})
        with pytest.raises(RemoteException):
            polybus.wait(p1)
        p2 = s.call("inc", (p1,), {})
        with pytest.raises(RemoteException) as err:
            polybus.wait(p2)
        upstream(err.value, p1)


def test_a_failure_two_stages_up_names_the_call_that_raised_it_once(
        tmp_path: Path, gates: Gates) -> None:
    with gates(tmp_path, toml()) as (c, gate, _):
        s = c.session()
        p1 = s.call("gated", (-1,), {})
        p3 = s.call("tag", (s.call("inc", (p1,), {}), 0), {})
        gate.set()
        with pytest.raises(RemoteException) as err:
            polybus.wait(p3)
        text = str(err.value).splitlines()[0]
        assert text.count("an upstream call failed") == 1, text
        assert err.value.remote_type == "ValueError"
        assert f"(raised in gated on {p1._rec.link.name}, upstream of inc, upstream of tag)" \
            in text, text


def test_an_error_said_in_its_consumers_error_is_not_said_again(
        tmp_path: Path, gates: Gates, caplog: pytest.LogCaptureFixture) -> None:
    # The producer's promise is dropped at once (only the call holds it): its error
    # reached the program in the consumer's, so it is not said as never looked at.
    with gates(tmp_path, toml()) as (c, gate, _), \
            caplog.at_level(logging.WARNING, logger="polybus.client.unseen"):
        s = c.session()
        p2 = s.call("inc", (s.call("gated", (-1,), {}),), {})
        gate.set()
        with pytest.raises(RemoteException):
            polybus.wait(p2)
        del p2
        gc.collect()
    assert not [r for r in caplog.records if r.name == "polybus.client.unseen"]


def test_a_sync_consuming_call_keeps_the_plain_sync_path(tmp_path: Path, gates: Gates) -> None:
    # A sync call waits anyway: its promise is waited for at the call, as with
    # forwarding on, and the binding keeps its plain path (it had lost it, and its
    # session took on the pump, for nothing: 19 -> 23-36 us a plain sync call).
    with gates(tmp_path, toml("sync")) as (c, gate, _):
        s = c.session()
        assert s.awaiting is None and s.dispatchers["inc"].plain_sync
        gate.set()
        assert s.call("inc", (s.call("gated", (2,), {}),), {}) == 5
        with pytest.raises(RemoteException) as err:  # a failure upstream: raised at the call
            s.call("inc", (s.call("gated", (-1,), {}),), {})
        assert "negative -1" in err.value.remote_message


def test_a_demand_backlog_takes_the_consumers_released_together(
        tmp_path: Path, gates: Gates) -> None:
    # async-demand(1), 2 replicas: of 10 consumers whose values come together, one per
    # replica is placed and the rest wait in the backlog (the held calls hold on).
    n = 10
    with gates(tmp_path, toml("async-demand(1)")) as (c, gate, hold):
        s = c.session()
        producers = [s.call("gated", (x,), {}) for x in range(n)]
        consumers = [s.call("held", (p,), {}) for p in producers]
        gate.set()
        assert [polybus.wait(p) for p in producers] == [2 * x for x in range(n)]
        assert not any(q.done for q in consumers)  # (each look reads, and places)
        d = s.dispatchers["held"]
        assert d.inflight == [1, 1] and d.backlogged == n - 2
        assert s.awaiting is not None and not s.awaiting.calls
        hold.set()
        assert [polybus.wait(q) for q in consumers] == [2 * x for x in range(n)]


@pytest.mark.parametrize("where", ["producer", "consumer"])
def test_aggregated_calls_with_forward_false(tmp_path: Path, gates: Gates, where: str) -> None:
    # An aggregating producer (its promises are of a batch's calls) or an aggregating
    # consumer: the consuming calls return at once; a call of a batch that raises fails
    # its consumer alone.
    agg = ", aggregate = 4"
    text = toml(gated=agg) if where == "producer" else toml(inc=agg)
    xs = [3, -1, 5, 7, 9]
    with gates(tmp_path, text) as (c, gate, _):
        s = c.session()
        outs = [s.call("inc", (s.call("gated", (x,), {}),), {}) for x in xs]
        assert not any(o.done for o in outs)
        gate.set()
        for x, o in zip(xs, outs, strict=True):
            if x < 0:
                with pytest.raises(RemoteException) as err:
                    polybus.wait(o)
                assert err.value.remote_message == "an upstream call failed: negative -1"
                assert "upstream of inc" in str(err.value)
            else:
                assert polybus.wait(o) == 2 * x + 1
        assert forwarded(c) == 0


def test_a_producer_given_up_fails_its_consumer_with_the_timeout(
        tmp_path: Path, gates: Gates) -> None:
    with gates(tmp_path, toml(gated=", timeout = 0.2")) as (c, _, _):
        s = c.session()
        p1 = s.call("gated", (1,), {})
        p2 = s.call("inc", (p1,), {})
        with pytest.raises(CallTimeoutError):
            polybus.wait(p1)
        with pytest.raises(RemoteException) as err:
            polybus.wait(p2)
        assert err.value.remote_type == "CallTimeoutError"
        assert err.value.remote_message.startswith("an upstream call failed: no answer from")


def test_a_consumers_timeout_counts_from_when_it_is_sent(tmp_path: Path, gates: Gates) -> None:
    # It waits at the client longer than its own timeout, and is answered: its count
    # began when it was written to a replica, as a backlogged call's does.
    # (a timeout of 1 s: once the gate opens, inc is written, run and answered within
    # it even on a loaded machine; the program waits longer than it before that)
    with gates(tmp_path, toml(inc=", timeout = 1.0")) as (c, gate, _):
        s = c.session()
        p2 = s.call("inc", (s.call("gated", (1,), {}),), {})
        time.sleep(1.2)
        assert not p2.done
        gate.set()
        assert polybus.wait(p2) == 3


def test_closing_the_client_fails_the_calls_still_waiting(tmp_path: Path, gates: Gates) -> None:
    with gates(tmp_path, toml()) as (c, _, _):
        s = c.session()
        p2 = s.call("inc", (s.call("gated", (1,), {}),), {})
        c.sessions.remove(s)
        s.close()
        with pytest.raises(ConnectionLostError, match="closed before this call to inc"):
            polybus.wait(p2)
