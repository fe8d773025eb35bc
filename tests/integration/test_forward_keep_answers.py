"""``use.<iface>.forward = "keep"``: large answers stay on their replicas (client/fwdown.py).

A producer answered before its promise is passed on came to the client by value, and the
client sent it on itself (forward = true): a short producer of a large value answered
before the program's next line in most runs. With ``forward = "keep"`` its replica keeps
the value (64 KiB or more) and the client is answered a ``Ref``: passed on, the value
goes replica to replica; used, it is fetched; dropped, it is let go on its replica.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.errors import WorkerDiedError
from polybus.wire.codec import Ref

from .comm_harness import Cluster, cluster
from .test_forward_backlog import client_bytes, kill, replica, settled

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.double = {{ idempotent = {idempotent} }}
define.add = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = {{ callstyle = "async", forward = {fwd} }}
use.add = {{ callstyle = "async" }}

[bind]
"client.double" = "server.double"
"client.add" = "server.add"
"""

X = np.random.default_rng(5).random(131072)  # 1 MiB
SLACK = 8192  # the small messages: calls, answers, Keeps, Forwards, releases


def toml(fwd: str = '"keep"', idempotent: bool = True) -> str:
    return TOML.format(fwd=fwd, idempotent=str(idempotent).lower())


def pinned(c: Cluster) -> int:
    return sum(rt.forwarding.kept.pinned for rt in c.runtimes)


def stored(c: Cluster) -> int:
    """Values the replicas' forward stores hold, pinned or in their LRU."""
    return sum(len(rt.forwarding.kept) for rt in c.runtimes)


def until(check: Any, within: float = 10.0) -> bool:
    """Until ``check()`` holds (a replica reads what the client sent in its own time)."""
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(check())


@pytest.mark.parametrize("fwd,transport", [("true", "tcp"), ('"keep"', "tcp"),
                                           ('"keep"', "shm")])
def test_a_value_answered_before_it_is_passed_on_stays_off_the_client(
        tmp_path: Path, fwd: str, transport: str) -> None:
    with cluster(tmp_path, toml(fwd), replicas=2, transport=transport) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)  # answered at the client (not asked for: not fetched)
        q = s.call("add", (p, p), {})  # on the other replica (round robin)
        assert np.array_equal(np.asarray(q), X * 4)
        sent, recv = client_bytes(c)
        counts = s.dispatchers["double"].counts
        if fwd == "true":  # came by value and went out again
            assert recv >= 2 * X.nbytes and sent >= 2 * X.nbytes
            assert (counts.forwarded, counts.through_client) == (0, 2)  # (p twice)
        else:
            assert recv < X.nbytes + SLACK and sent < X.nbytes + SLACK, (sent, recv)
            assert (counts.forwarded, counts.through_client) == (2, 0)
            assert s.forwarder.fetched == 0  # type: ignore[attr-defined]


def test_a_kept_value_the_program_uses_is_fetched_and_let_go(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)
        assert type(p._rec.value) is Ref and pinned(c) == 1  # type: ignore[attr-defined]
        assert np.array_equal(polybus.wait(p), X * 2)
        assert s.forwarder.fetched == 1  # type: ignore[attr-defined]
        assert until(lambda: pinned(c) == 0)  # (at the client now: let go there)
        assert stored(c) == 0  # (freed, not left in the store's LRU)
        # Passed on after its use, it goes from the client, as any value it has.
        assert np.array_equal(np.asarray(s.call("add", (p, p), {})), X * 4)


def test_a_small_answer_comes_by_value(tmp_path: Path) -> None:
    x = np.arange(1000.0)  # 8 KB: less than KEEP_MIN
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p = s.call("double", (x,), {})
        settled(p)
        assert type(p._rec.value) is np.ndarray  # type: ignore[attr-defined]
        assert np.array_equal(polybus.wait(p), x * 2)
        assert s.forwarder.fetched == 0 and pinned(c) == 0  # type: ignore[attr-defined]
        assert all(not rt.forwarding.targets and not rt.forwarding.sized for rt in c.runtimes)


def test_a_dropped_promise_is_let_go_on_its_replica(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)
        unanswered = s.call("double", (X + 1,), {})  # dropped before its answer
        assert pinned(c) >= 1
        del p, unanswered
        gc.collect()
        x = np.arange(10.0)
        assert np.array_equal(polybus.wait(s.call("double", (x,), {})), x * 2)  # steps
        keeper = s.forwarder.keeper  # type: ignore[attr-defined]
        assert until(lambda: (polybus.wait(s.call("double", (x,), {})) is not None
                              and keeper.released == 2 and pinned(c) == 0))
        assert stored(c) == 0  # (freed, not left in the store's LRU: a long program
        # dropping its promises held up to the store's bound, 512 MiB, on each replica)


def test_a_value_passed_on_unanswered_goes_replica_to_replica(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        q = s.call("add", (p, p), {})  # (whether p is answered yet or not)
        assert np.array_equal(np.asarray(q), X * 4)
        _, recv = client_bytes(c)
        assert recv < X.nbytes + SLACK
        assert s.dispatchers["double"].counts.through_client == 0


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_kept_value_whose_replica_died(tmp_path: Path, idempotent: bool) -> None:
    with cluster(tmp_path, toml(idempotent=idempotent), replicas=2) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)
        producer = replica(c, p)
        kill(producer)
        if idempotent:  # run again on the replica left, which keeps it in turn
            assert np.array_equal(polybus.wait(p), X * 2)
            assert p._rec.attempts == 2  # type: ignore[attr-defined]
        else:  # (kept there, not forwarded; and why it is not run again)
            with pytest.raises(WorkerDiedError, match=(
                    rf"^the answer of this call to double was kept on its replica "
                    rf"\({producer.name}\), which is gone; double is not idempotent, so it "
                    rf"is not run again \(modules\.server\.define\.double\.idempotent = "
                    rf"false\)$")):
                polybus.wait(p)


def test_a_kept_value_whose_only_replica_died(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=1) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)
        kill(replica(c, p))
        with pytest.raises(WorkerDiedError, match=(
                r"^the answer of this call to double was kept on its replica \(server-0\), "
                r"which is gone, and no replica of server is left to run it again$")):
            polybus.wait(p)


# ``nap(x, gate)``: the harness's ``until``, x once the file ``gate`` exists (a directory
# that does: at once)
NAP = TOML.replace('define.add = {{}}', 'define.add = {{}}\ndefine.until = {{}}').replace(
    '"client.add" = "server.add"', '"client.add" = "server.add"\n"client.nap" = "server.until"'
).replace('use.add = {{ callstyle = "async" }}',
          'use.add = {{ callstyle = "async" }}\nuse.nap = {{ callstyle = "async" }}')


def test_a_dropped_promise_re_run_for_its_consumer_is_let_go_again(tmp_path: Path) -> None:
    # Review: p is dropped (its value let go on A, its Keeper entry gone), its consumer
    # still needs it; A dies, so Forwarder._after_lost (kept_lost) runs p again on B.
    # The re-run's ForwardComm.send asks B to keep p's answer (Keeper.ask puts it back
    # in `calls`), but no promise is left to drop: B's pin for ".own" stays for ever.
    with cluster(tmp_path, NAP.format(fwd='"keep"', idempotent="true"), replicas=2) as c:
        s = c.session()
        now, flag = str(tmp_path), tmp_path / "q-may-end"
        s.call("nap", (0, now), {})  # (so the next nap goes to the other replica)
        p = s.call("double", (X,), {})
        settled(p)
        q = s.call("nap", (p, str(flag)), {})  # (it runs on till A is lost: p again)
        a = replica(c, p)
        if replica(c, q) is a:
            pytest.skip("consumer placed beside its producer")
        rec = p._rec  # type: ignore[attr-defined]  # (its edge holds it anyway)
        del p
        gc.collect()
        try:
            s.call("nap", (0, now), {})  # (a step: the drop is let go)
            assert until(lambda: a.forwarding.forwarded == 1)  # (q has its value on B)
            kill(a)
            # (q still running: p runs again on B, the value q needs made again)
            assert until(lambda: s.reactor.poll() or rec.attempts > 1), rec.attempts
        finally:
            flag.touch()
        b = next(rt for rt in c.runtimes if rt is not a)
        assert np.array_equal(np.asarray(q), X * 2)
        x = np.arange(10.0)
        assert until(lambda: polybus.wait(s.call("nap", (x, now), {})) is not None
                     and b.forwarding.kept.pinned == 0, within=5.0), \
            (b.forwarding.kept.pinned, list(s.forwarder.keeper.calls), rec.attempts)  # type: ignore[attr-defined]


DEMAND = TOML.replace('use.add = {{ callstyle = "async" }}',
                      'use.add = {{ callstyle = "async" }}\n'
                      'use.nap = {{ callstyle = "async-demand(1)" }}').replace(
    'define.add = {{}}', 'define.add = {{}}\ndefine.until = {{}}').replace(
    '"client.add" = "server.add"', '"client.add" = "server.add"\n"client.nap" = "server.until"')


def test_a_promise_dropped_before_its_consumer_is_placed_is_let_go_after_it(
        tmp_path: Path) -> None:
    # Review: the consumer waits in nap's backlog (each replica's window of one is busy),
    # so its Forward has not gone when the program drops p. The release of p's value was
    # sent at once, before that Forward: no longer pinned for p, the value could be
    # evicted before its consumer took it. It goes once the consumer has ended.
    with cluster(tmp_path, DEMAND.format(fwd='"keep"', idempotent="true"),
                 replicas=2) as c:
        s = c.session()
        p = s.call("double", (X,), {})
        settled(p)
        assert type(p._rec.value) is Ref  # type: ignore[attr-defined]
        a = replica(c, p)
        seen: list[str] = []
        handle = a.forwarding.handle

        def noted(ch: Any, msg: Any) -> None:
            kind = type(msg).__name__
            if kind == "Keep" and msg.release:
                seen.append("release")
            elif kind == "Forward":
                seen.append("forward")
            handle(ch, msg)

        a.forwarding.handle = noted  # type: ignore[method-assign]
        busy = tmp_path / "busy-may-end"
        try:
            for _ in c.runtimes:  # (each replica's window of one: busy till the gate)
                s.call("nap", (0, str(busy)), {})
            q = s.call("nap", (p, str(tmp_path)), {})
            assert s.dispatchers["nap"].backlogged == 1  # (waits at the client to be placed)
            del p
            gc.collect()
            s.reactor.poll()  # (a step: the drop is looked at)
        finally:
            busy.touch()  # (the consumer is placed now, after the drop)
        assert np.array_equal(np.asarray(q), X * 2)
        keeper = s.forwarder.keeper  # type: ignore[attr-defined]
        x = np.arange(10.0)
        assert until(lambda: polybus.wait(s.call("double", (x,), {})) is not None
                     and keeper.released == 1 and pinned(c) == 0)
        assert seen == ["forward", "release"], seen
