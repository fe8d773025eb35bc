"""Forwarding between stages (promise pipelining): values go replica to replica."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.errors import RemoteError, RemoteException

from .comm_harness import Cluster, cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

TOML = """
[modules.server]
source = "server.py"
replication = {replicas}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = {{ callstyle = "{style}", forward = {fwd} }}
use.scale = {{ callstyle = "{style}", forward = {fwd} }}
use.add = {{ callstyle = "{style}", forward = {fwd} }}
use.slow_double = {{ callstyle = "{style}", forward = {fwd} }}
use.gated_double = {{ callstyle = "{style}", forward = {fwd} }}

[bind]
"client.double" = "server.double"
"client.scale" = "server.scale"
"client.add" = "server.add"
"client.slow_double" = "server.slow_double"
"client.gated_double" = "server.gated_double"
"""


def at(tmp: Path, name: object) -> Path:
    (tmp / str(name)).mkdir()
    return tmp / str(name)


def toml(fwd: bool = True, style: str = "async", replicas: int = 3) -> str:
    return TOML.format(fwd=str(fwd).lower(), style=style, replicas=replicas)


def client_bytes(c: Cluster) -> tuple[int, int]:
    s = c.sessions[-1]
    links = [lk for links in s.links.values() for lk in links]
    return (sum(lk.channel.bytes_sent for lk in links),
            sum(lk.channel.bytes_received for lk in links))


def chain(c: Cluster, x: np.ndarray, k: int, flag: Path) -> np.ndarray:
    # Stages that work a little (20 ms): a producer that answers before the client's
    # Forward reaches it sends its value to the client, which relays it (still correct).
    # So the first answers once the client has made every stage (the file ``flag``):
    # each Forward is written before its producer can answer, whatever the client's
    # pace (20 ms stages alone: a client stalled that long relayed a value itself).
    s = c.session()
    p: object = s.call("gated_double", (x, str(flag)), {})
    for _ in range(k - 1):
        p = s.call("slow_double", (p, 0.02), {})
    flag.touch()
    return np.asarray(p)


def test_pipeline_bytes_drop_by_k_minus_1_transfers(tmp_path: Path) -> None:
    k = 4
    x = np.random.default_rng(1).random(16384)  # 128 KiB
    out = {}
    for fwd in (True, False):
        with cluster(at(tmp_path, fwd), toml(fwd), replicas=3) as c:
            out[fwd] = (chain(c, x, k, tmp_path / f"gate-{fwd}"), client_bytes(c),
                        sum(rt.forwarding.forwarded for rt in c.runtimes))
    (v_on, (sent_on, recv_on), moved_on), (v_off, (sent_off, recv_off), moved_off) = (
        out[True], out[False])
    assert np.array_equal(v_on, v_off) and np.allclose(v_on, x * 2**k)
    assert moved_on == k - 1 and moved_off == 0
    n = x.nbytes
    # Without forwarding each of the k-1 intermediates goes out and back: 2(k-1) transfers.
    assert sent_off + recv_off - (sent_on + recv_on) >= 2 * (k - 1) * n * 0.99
    # With it the client sends x once and receives the last value once, plus small messages.
    assert recv_on < n + 2048 and sent_on < n + 2048


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_quick_stage_still_forwards_its_large_value(tmp_path: Path, transport: str) -> None:
    # A stage of ~5 ms answered inline before reading the client's Forward, which had
    # come meanwhile: its value went to the client (about one product in two with a
    # 5 ms stage, found by a new user checking bytes_received). The replica now reads
    # its client's messages before it sends a large answer. Each round's first stage
    # answers the moment the client has sent the whole round (a flag file), so its
    # Forward has always come meanwhile: a 5 ms first stage let a client slower than
    # that (one in twenty runs, GIL and CPUs shared) send it after the answer went.
    x = np.random.default_rng(2).random(32768)  # 256 KiB
    rounds, k = 6, 3
    with cluster(tmp_path, toml(), replicas=3, transport=transport) as c:
        s = c.session()
        for r in range(rounds):
            flag = tmp_path / f"round{r}"
            p: object = s.call("gated_double", (x, str(flag)), {})
            for _ in range(k - 1):
                p = s.call("slow_double", (p, 0.005), {})
            flag.touch()
            assert np.allclose(np.asarray(p), x * 2**k)
        _, recv = client_bytes(c)
        moved = sum(rt.forwarding.forwarded for rt in c.runtimes)
    assert moved == rounds * (k - 1)
    assert recv < rounds * (x.nbytes + 4096), recv  # the last values only


def test_client_never_receives_the_intermediate(tmp_path: Path) -> None:
    x = np.arange(32768, dtype=np.float64)  # 256 KiB
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        big = s.call("slow_double", (x, 0.02), {})
        small = s.call("scale", (s.call("add", (big, big), {}), 0), {})
        assert float(np.asarray(small).sum()) == 0.0
        _, recv = client_bytes(c)
        assert recv < x.nbytes + 4096  # the final (zeros) array, not big or big+big
        assert s.forwarder.fetched == 0  # type: ignore[attr-defined]


def test_client_using_the_promise_fetches_it(tmp_path: Path) -> None:
    x = np.arange(1000.0)
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("double", (x,), {})
        p2 = s.call("double", (p1,), {})
        assert np.allclose(np.asarray(p2), x * 4)
        assert np.allclose(np.asarray(p1), x * 2)  # forwarded, then fetched back
        p3 = s.call("add", (p1, p2), {})           # and forwarded again from its replica
        assert np.allclose(np.asarray(p3), x * 6)


def test_a_forwarded_result_lost_before_its_fetch_names_interface_and_replica(
        tmp_path: Path) -> None:
    # It said "the forwarded result of call 0 to double ...": a number of the session's.
    # (p1 still running when the consuming call is made: so its value is forwarded, not
    # sent to the client, which fetches it from the producer's cache when it is used)
    x = np.arange(1000.0)
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("slow_double", (x, 0.3), {})
        assert np.allclose(np.asarray(s.call("double", (p1,), {})), x * 4)
        for rt in c.runtimes:
            rt.forwarding.kept.clear()  # the kept value is gone (evicted)
        with pytest.raises(RemoteError) as err:
            np.asarray(p1)
        text = str(err.value)
        assert err.value.interface == "slow_double"
        assert err.value.replica in ("server-0", "server-1")
        assert re.search(r"\bcall \d", text) is None, text
        assert "slow_double" in text and err.value.replica in text, text


def test_stage1_failure_reaches_both_promises_typed(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("scale", (np.ones(4), -1), {})
        p2 = s.call("double", (p1,), {})
        with pytest.raises(RemoteException) as e2:
            polybus.wait(p2)
        assert e2.value.remote_type == "ValueError" and "upstream" in str(e2.value)
        assert "negative scale" in str(e2.value)
        with pytest.raises(RemoteException) as e1:
            polybus.wait(p1)
        assert e1.value.remote_type == "ValueError"


def test_an_upstream_failure_names_the_call_that_raised_it(tmp_path: Path) -> None:
    # The consumer's replica answers for a producer that failed: the message said
    # "raised in double on server-1" over slow_double's traceback from server-0.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("slow_double", (None, 0.2), {})  # None * 2 raises, after 0.2 s
        p2 = s.call("double", (p1,), {})              # held at its replica for p1's value
        with pytest.raises(RemoteException) as e2:
            polybus.wait(p2)
        producer, consumer = p1._rec.link.name, p2._rec.link.name  # type: ignore[attr-defined]
        text = str(e2.value).splitlines()[0]
        assert e2.value.remote_type == "TypeError" and "upstream" in text, text
        assert f"raised in slow_double on {producer}, upstream of double on {consumer}" in text
        assert e2.value.interface == "double" and e2.value.replica == consumer


def test_a_failure_three_stages_up_names_the_call_that_raised_it_once(tmp_path: Path) -> None:
    # scale raises; double is held for its value and fails upstream; add is held for
    # double's. add's error said "an upstream call failed: " twice and named double.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("scale", (np.ones(4), -1), {})
        p2 = s.call("double", (p1,), {})
        p3 = s.call("add", (p2, 1.0), {})
        with pytest.raises(RemoteException) as e3:
            polybus.wait(p3)  # (double's own failure may not be at the client yet)
        with pytest.raises(RemoteException) as e2:
            polybus.wait(p2)
        text = str(e3.value).splitlines()[0]
        assert text.count("an upstream call failed") == 1, text
        assert e3.value.remote_type == "ValueError" and "negative scale -1" in text, text
        names = [r._rec.link.name for r in (p1, p2, p3)]  # type: ignore[attr-defined]
        assert (f"raised in scale on {names[0]}, upstream of double on {names[1]}, "
                f"upstream of add on {names[2]}") in text, text
        assert str(e2.value).count("an upstream call failed") == 1


def test_stage2_failure_is_typed_and_stage1_still_good(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p1 = s.call("double", (np.ones(4),), {})
        p2 = s.call("scale", (p1, -3), {})
        with pytest.raises(RemoteException) as e2:
            polybus.wait(p2)
        assert e2.value.remote_type == "ValueError" and "negative scale -3" in str(e2.value)
        assert np.allclose(np.asarray(p1), 2.0)


def test_demand_backlog_and_same_values_as_unforwarded(tmp_path: Path) -> None:
    xs = [np.full(64, float(i)) for i in range(30)]
    results = {}
    for fwd in (True, False):
        with cluster(at(tmp_path, fwd), toml(fwd, "async-demand(1)"), replicas=2) as c:
            s = c.session()
            outs = [s.call("add", (s.call("double", (x,), {}), s.call("scale", (x, 3), {})), {})
                    for x in xs]
            results[fwd] = [np.asarray(o) for o in outs]
    for a, b, x in zip(results[True], results[False], xs, strict=True):
        assert np.array_equal(a, b) and np.allclose(a, x * 5)


def test_producer_replica_dying_reruns_stage1(tmp_path: Path) -> None:
    x = np.arange(100.0)
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        polybus.wait(s.call("double", (x,), {}))  # double's next call goes to the other replica
        p1 = s.call("slow_double", (x, 0.5), {})  # on server-0
        p2 = s.call("double", (p1,), {})           # on server-1, waiting for p1
        time.sleep(0.1)
        c.runtimes[0].stop()                       # the producer dies running p1
        assert np.allclose(np.asarray(p2), x * 4)  # p1 re-run on server-1, forwarded locally


def test_dna_pipeline_example(tmp_path: Path) -> None:
    app = EXAMPLES / "dna" / "pipeline.toml"
    small = {"modules.client.args": [6, 16, 12, 2]}
    on = polybus.run(app, small)
    off = polybus.run(app, {**small, **{f"modules.client.use.stage{i}.forward": False
                                       for i in (2, 3, 4)}})
    assert on.result == off.result and len(on.result) == 6 and len(on.result[0]) == 16
    assert on.bytes_sent + on.bytes_received < off.bytes_sent + off.bytes_received


def test_forward_false_on_the_producing_binding_keeps_its_answers_at_the_client(
        tmp_path: Path) -> None:
    """``use.f.forward = false`` on the binding that makes the promise: its answers are
    not forwarded even to a binding that forwards (it used to do nothing there: only the
    consuming binding's key counted). The values are the same either way."""
    x = np.random.default_rng(2).random(16384)  # 128 KiB
    out = {}
    for producer_forwards in (True, False):
        text = toml(True).replace(
            'use.slow_double = { callstyle = "async", forward = true }',
            f'use.slow_double = {{ callstyle = "async", forward = {str(producer_forwards).lower()} }}')
        with cluster(at(tmp_path, producer_forwards), text, replicas=3) as c:
            s = c.session()
            p = s.call("slow_double", (x, 0.02), {})  # the producer
            q = s.call("double", (p,), {})            # a consumer that forwards
            out[producer_forwards] = (np.asarray(q), client_bytes(c),
                                      sum(rt.forwarding.forwarded for rt in c.runtimes))
    (v_on, (sent_on, recv_on), moved_on), (v_off, (sent_off, recv_off), moved_off) = (
        out[True], out[False])
    assert np.array_equal(v_on, v_off) and np.allclose(v_on, x * 4)
    assert moved_on == 1 and moved_off == 0
    # Kept at the client: p comes back to it and goes out again (two transfers more).
    assert sent_off + recv_off - (sent_on + recv_on) >= 2 * x.nbytes * 0.99


def test_a_producer_that_answered_before_its_forward_came_forgets_the_forward(
        tmp_path: Path) -> None:
    # The producer's answer is read only when the program next calls: the consumer's call
    # finds it outstanding and sends a Forward, which its replica reads after answering
    # by value. The client sends the value on itself, and Cancel: the replica kept the
    # Forward until the client went (and every later answer looked it up).
    x = np.arange(10.0)
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        for _ in range(3):
            p1 = s.call("double", (x,), {})
            time.sleep(0.05)  # answered meanwhile, by value: no Forward has come yet
            assert np.array_equal(np.asarray(s.call("double", (p1,), {})), x * 4)
        assert s.forwarder.relayed == 3  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5  # (until the replica has read the last Cancel)
        while any(rt.forwarding.targets for rt in c.runtimes) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [rt.forwarding.targets for rt in c.runtimes] == [{}, {}]
