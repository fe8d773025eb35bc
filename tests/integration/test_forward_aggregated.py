"""Forwarding the promise of an aggregated call (``aggregate`` on the producing binding).

Such a promise was not forwarded at all: the consuming call waited for the producer's
batch to answer (the program thread blocked there, and a pipeline lost all overlap
between its stages) and its value went to the client and out again. Now the consuming
call goes at once and the producer's replica sends the value to the consumer's.

The producer here waits for a gate (a threading.Event in the server module, which runs
in this process): a consuming call that returns before the gate is opened did not wait
for its producer. On the old code it waited, the producer gave up on the gate after
GATE_S and raised, and the consuming call raised that error.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.errors import RemoteException

from . import comm_harness
from .comm_harness import Cluster, cluster

GATE_S = 10.0
GATED = f'''
import threading
GATE = threading.Event()   # opened by the test
STARTED = []               # calls of gated_double begun
DONE = []                  # calls of gated_double ended

def gated_double(x):
    STARTED.append(1)
    if not GATE.wait({GATE_S}):
        raise RuntimeError("the gate was never opened: the program waited for this call")
    DONE.append(1)
    return x * 2
'''

TOML = """
[modules.server]
source = "server.py"
replication = 3
define.gated_double = {{ idempotent = {idempotent} }}
define.double = {{}}
define.scale = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.s1 = {{ callstyle = "async", aggregate = 4, linger = "50ms", forward = {fwd} }}
use.s2 = {{ callstyle = "async", aggregate = 4, linger = "50ms", forward = {fwd} }}
use.s3 = {{ callstyle = "async", aggregate = 4, linger = "50ms", forward = {fwd} }}
use.s4 = {{ callstyle = "async", forward = {fwd} }}
use.scale = {{ callstyle = "async", aggregate = 4, linger = "50ms", forward = {fwd} }}
use.double = {{ callstyle = "async", forward = {fwd} }}
use.later = {{ callstyle = "async-demand(1)", forward = {fwd} }}

[bind]
"client.s1" = "server.gated_double"
"client.s2" = "server.double"
"client.s3" = "server.double"
"client.s4" = "server.double"
"client.scale" = "server.scale"
"client.double" = "server.double"
"client.later" = "server.double"
"""

N = 16384  # float64: 128 KiB values, worth keeping off the client
SLACK = 8192  # the small messages of a run: calls, answers, Forwards


def toml(fwd: bool = True, idempotent: bool = True) -> str:
    return TOML.format(fwd=str(fwd).lower(), idempotent=str(idempotent).lower())


@contextmanager
def gated(tmp: Path, text: str, monkeypatch: pytest.MonkeyPatch,
          replicas: int = 3) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """A cluster whose server module has gated_double; with that module's globals."""
    tmp.mkdir()
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + GATED)
    with cluster(tmp, text, replicas=replicas) as c:
        g = c.functions["gated_double"].__globals__
        try:
            yield c, g
        finally:
            g["GATE"].set()  # (no replica thread left waiting)


def written(s: Any, c: Cluster) -> None:
    """Wait (bounded) until the client has written every batch and what it asks of them.
    A Forward the program's call asks of a batch while the linger timer writes that
    batch is left for the next thread that reads (client/batchsend.py, `settle_owed`):
    were the gate opened first, the producer could answer before it came, and its value
    go through the client, which the byte counts below would take for a defect."""
    deadline = time.monotonic() + 10
    while any(bt.owes or bt.unwritten for bt in s.batchers) or s.reactor.unsent_left():
        assert time.monotonic() < deadline, "the client never wrote what it had"
        s.reactor.poll()
    # And the replicas have read it: a Forward written but not yet read when its
    # producer answers finds no request there, and the value goes through the client
    # (a replica's reading thread can be that late on a machine loaded to 9 on 2 CPUs).
    links = [lk for group in s.links.values() for lk in group]
    wrote = sum(lk.channel.bytes_sent for lk in links)
    while sum(ch.bytes_received for rt in c.runtimes for ch in list(rt._channels)) < wrote:
        assert time.monotonic() < deadline, "the replicas never read what was written"
        time.sleep(0.001)


def client_bytes(c: Cluster) -> tuple[int, int]:
    links = [lk for links in c.sessions[-1].links.values() for lk in links]
    return (sum(lk.channel.bytes_sent for lk in links),
            sum(lk.channel.bytes_received for lk in links))


def inputs(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.random(N) + i for i in range(n)]


@pytest.mark.parametrize("stages", [2, 4])
def test_a_pipeline_from_an_aggregated_stage_overlaps_and_keeps_values_off_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stages: int) -> None:
    xs = inputs(8)
    out = {}
    for fwd in (True, False):
        with gated(tmp_path / str(fwd), toml(fwd), monkeypatch) as (c, g):
            s = c.session()
            if not fwd:
                g["GATE"].set()  # (unforwarded: compared for its bytes; test_forward_off.py)
            firsts, lasts = [], []
            for x in xs:
                p = s.call("s1", (x,), {})
                firsts.append(p)
                for k in range(2, stages + 1):
                    p = s.call(f"s{k}", (p,), {})
                lasts.append(p)
            if fwd:
                # Every call of the pipeline returned while no producer had answered.
                assert not g["DONE"] and not g["GATE"].is_set()
                written(s, c)
                g["GATE"].set()
            values = [np.asarray(p) for p in lasts]
            out[fwd] = values, client_bytes(c), getattr(s, "forwarder", None)
            if fwd:
                used = np.asarray(firsts[3])  # the program may still use a forwarded value
                assert np.array_equal(used, xs[3] * 2)
    (v_on, (sent_on, recv_on), f_on), (v_off, (sent_off, recv_off), _) = out[True], out[False]
    for a, b, x in zip(v_on, v_off, xs, strict=True):
        assert np.array_equal(a, b) and np.allclose(a, x * 2**stages)
    n = len(xs) * xs[0].nbytes
    # The inputs go out and the last values come in; no value between stages does
    # (but the one the program asked for: fetched, not relayed). (What was relayed and
    # fetched said with the bytes: a value through the client, or an input sent again.)
    said = f"relayed {f_on.relayed}, fetched {f_on.fetched}"
    assert f_on.relayed == 0 and f_on.fetched == 1, said
    assert sent_on < n + len(xs) * SLACK, (sent_on, said)
    assert recv_on < n + xs[0].nbytes + len(xs) * SLACK, (recv_on, said)
    assert sent_off + recv_off - (sent_on + recv_on) >= 2 * (stages - 1) * n - xs[0].nbytes


def test_a_failing_call_of_a_batch_fails_its_consumer_alone_typed_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xs: list[Any] = inputs(4)
    xs[2] = None  # one batch of s1: its call 2 raises (None * 2)
    with gated(tmp_path / "c", toml(), monkeypatch) as (c, g):
        s = c.session()
        ps, qs = [], []
        for x in xs:
            ps.append(s.call("s1", (x,), {}))
            qs.append(s.call("double", (ps[-1],), {}))
        assert not g["DONE"]  # (made while their producers wait at the gate)
        written(s, c)
        g["GATE"].set()
        with pytest.raises(RemoteException) as err:
            polybus.wait(qs[2])
        producer, consumer = ps[2]._rec.link.name, qs[2]._rec.link.name  # type: ignore[attr-defined]
        text = str(err.value).splitlines()[0]
        assert err.value.remote_type == "TypeError" and "upstream" in text, text
        assert "NoneType" in text, text
        assert f"raised in gated_double on {producer}, upstream of double on {consumer}" in text
        for i in (0, 1, 3):
            assert np.array_equal(np.asarray(qs[i]), xs[i] * 4)
        with pytest.raises(RemoteException) as own:
            polybus.wait(ps[2])
        assert own.value.remote_type == "TypeError"
        sent, recv = client_bytes(c)
        assert sent < 3 * N * 8 + 4 * SLACK, sent  # the three inputs only
        assert recv < 3 * N * 8 + 4 * SLACK, recv  # the three last values only
        assert s.forwarder.relayed == 0  # type: ignore[attr-defined]


def test_a_consumer_waiting_in_a_backlog_has_an_aggregated_producer_keep_its_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # later is async-demand(1) on 3 replicas: three consumers are placed (held there for
    # their values), the others wait at the client, and their producers' replica is
    # asked to keep the values (Keep) until they are placed.
    xs = inputs(8)
    with gated(tmp_path / "c", toml(), monkeypatch) as (c, g):
        s = c.session()
        qs = [s.call("later", (s.call("s1", (x,), {}),), {}) for x in xs]
        assert s.dispatchers["later"].backlogged == len(xs) - 3
        assert not g["DONE"]
        written(s, c)
        g["GATE"].set()
        for q, x in zip(qs, xs, strict=True):
            assert np.array_equal(np.asarray(q), x * 4)
        sent, recv = client_bytes(c)
        f = s.forwarder  # type: ignore[attr-defined]
        n = len(xs) * xs[0].nbytes
        assert sent < n + len(xs) * SLACK and recv < n + len(xs) * SLACK, (sent, recv)
        assert f.keeps > 0 and f.relayed == 0


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_producer_replica_dying_with_the_batch_reruns_it_or_fails_the_consumers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idempotent: bool) -> None:
    xs = inputs(4)
    with gated(tmp_path / "c", toml(idempotent=idempotent), monkeypatch) as (c, g):
        s = c.session()
        ps = [s.call("s1", (x,), {}) for x in xs]  # one batch, sent once full
        qs = [s.call("double", (p,), {}) for p in ps]
        deadline = time.monotonic() + 10
        while not g["STARTED"] and time.monotonic() < deadline:
            time.sleep(0.005)  # (until the batch runs: its replica is then to die)
        assert g["STARTED"] and not g["DONE"]
        name = ps[0]._rec.link.name  # type: ignore[attr-defined]
        rt = next(rt for rt in c.runtimes if rt.name == name)
        rt.stop(grace=0.05)  # (its thread stays in the gated call)
        if idempotent:  # run again on another replica, and forwarded from there
            g["GATE"].set()
            for q, x in zip(qs, xs, strict=True):
                assert np.array_equal(np.asarray(q), x * 4)
            assert ps[0]._rec.link.name != name  # type: ignore[attr-defined]
        else:
            for q in qs:
                with pytest.raises(RemoteException) as err:
                    polybus.wait(q)
                assert err.value.remote_type == "WorkerDiedError", err.value
                assert "upstream" in str(err.value) and name in str(err.value)
