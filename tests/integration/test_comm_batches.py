"""Aggregation's lean path (client/batching.py, worker/batching.py): calls travel as
CallBatch messages; behaviour must be that of the same calls sent one by one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client.batching import Batcher
from polybus.client.session import Session
from polybus.errors import BusyError, CallTimeoutError, RemoteException

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.scale = { callstyle = "async-demand(1)", aggregate = 16, linger = "60s" }
use.nap = { callstyle = "async-demand(1)", aggregate = 4, linger = "60s" }
use.echo = { callstyle = "async", aggregate = "1KiB", linger = "60s" }

[bind]
"client.scale" = "server.scale"
"client.nap" = "server.nap"
"client.echo" = "server.echo"
"""

PLAIN = TOML.replace(', aggregate = 16, linger = "60s"', "")


def _batcher(s: Session, name: str) -> Batcher:
    (b,) = [b for b in s.batchers if b.interface == name]
    return b


def _outcome(p: Any) -> Any:
    try:
        return ("value", polybus.wait(p))
    except RemoteException as exc:
        return ("error", exc.remote_type, exc.remote_message)


def test_one_batch_keeps_order_and_fails_one_call_alone(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=1) as c:
        s = c.session()
        out = [s.call("scale", (i, -1 if i == 5 else 3), {}) for i in range(16)]
        assert _batcher(s, "scale").batches == 1  # the 16th call closed the one batch
        for i, p in enumerate(out):
            if i == 5:
                with pytest.raises(RemoteException, match="negative scale -1"):
                    polybus.wait(p)
            else:
                assert polybus.wait(p) == 3 * i


def test_same_results_with_and_without_aggregation(tmp_path: Path) -> None:
    def results(toml: str, where: Path) -> list[Any]:
        where.mkdir()
        with cluster(where, toml, replicas=2) as c:
            s = c.session()
            calls = [s.call("scale", (i, -1 if i % 7 == 3 else i % 5), {}) for i in range(300)]
            calls.append(s.call("scale", (2,), {"k": 4}))  # keyword arguments: general path
            calls.append(s.call("scale", (calls[0], 9), {}))  # a promise argument, too
            return [_outcome(p) for p in calls]

    aggregated = results(TOML, tmp_path / "agg")
    assert aggregated == results(PLAIN, tmp_path / "plain")
    assert sum(1 for o in aggregated if o[0] == "error") == 43


def test_lone_call_is_sent_when_its_linger_runs_out(tmp_path: Path) -> None:
    toml = TOML.replace('aggregate = 16, linger = "60s"', 'aggregate = 16, linger = "20ms"')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        p = s.call("scale", (7, 6), {})
        deadline = time.monotonic() + 10
        while c.runtimes[0].calls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the program does nothing with polybus meanwhile
        assert c.runtimes[0].calls == 1
        assert polybus.wait(p) == 42


def test_lone_call_is_sent_when_waited_for(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=1) as c:  # linger 60 s: only the wait sends it
        s = c.session()
        assert polybus.wait(s.call("scale", (7, 6), {})) == 42
        assert _batcher(s, "scale").batches == 1


def test_byte_size_closes_the_batch(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=1) as c:
        s = c.session()
        b = _batcher(s, "echo")
        payload = b"x" * 100
        out = [s.call("echo", (payload,), {}) for _ in range(9)]
        assert b.batches == 0  # 9 calls of ~108 bytes: under 1 KiB, still open
        out.append(s.call("echo", (payload,), {}))
        assert b.batches == 1 and b.open is None  # the 10th crossed 1 KiB
        out += [s.call("echo", (payload,), {}) for _ in range(3)]
        assert b.batches == 1 and b.open is not None and len(b.open.args) == 3
        assert [polybus.wait(p) for p in out] == [payload] * 13


def test_replica_death_mid_batch_reruns_the_batch_elsewhere(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        out = [s.call("nap", (i, 0.3), {}) for i in range(8)]  # one batch of 4 per replica
        b = _batcher(s, "nap")
        assert b.batches == 2 and all(n == 1 for n in b.inflight)
        deadline = time.monotonic() + 10
        while any(rt._running == 0 for rt in c.runtimes) and time.monotonic() < deadline:
            time.sleep(0.01)
        for ch in list(c.runtimes[0]._channels):  # dies mid-batch: its answers never come
            ch.close()
        assert [polybus.wait(p) for p in out] == list(range(8))
        assert c.runtimes[1].calls == 8  # its own batch and the lost one, run again


def test_timeout_fails_the_waited_call_and_its_batch_still_answers(tmp_path: Path) -> None:
    toml = TOML.replace('use.nap = { callstyle = "async-demand(1)", aggregate = 4, linger = "60s" }',
                        'use.nap = { callstyle = "async", aggregate = 4, linger = "60s", '
                        'timeout = "100ms" }')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        slow, fast = s.call("nap", (1, 0.5), {}), s.call("nap", (2, 0.0), {})
        with pytest.raises(CallTimeoutError):
            polybus.wait(slow)
        with pytest.raises(CallTimeoutError):  # answered with its batch, after the deadline
            polybus.wait(fast)
        # The replica finishes the slow batch (its late answer is dropped): waited for,
        # bounded, as a call sent before would queue behind it and pass its 100 ms.
        rt = c.runtimes[0]
        deadline = time.monotonic() + 10
        while (rt.calls < 2 or rt._running) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert polybus.wait(s.call("nap", (3, 0.0), {})) == 3


def test_waiting_on_a_batch_held_back_writes_it(tmp_path: Path) -> None:
    toml = TOML.replace('aggregate = 16, linger = "60s"', 'aggregate = 2, linger = "60s"').replace(
        '"async-demand(1)", aggregate = 2', '"async-demand(8)", aggregate = 2')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        out = [s.call("scale", (i, 2), {}) for i in range(6)]
        assert _batcher(s, "scale").held[0]  # the third batch waits for company
        assert polybus.wait(out[-1]) == 10  # waited for first: it must be written
        assert [polybus.wait(p) for p in out] == [2 * i for i in range(6)]


def test_a_promise_of_an_aggregated_call_inside_arguments_or_broadcast(tmp_path: Path) -> None:
    import numpy as np

    with cluster(tmp_path, TOML, replicas=1) as c:
        s = c.session()
        p = s.call("scale", (3, 2), {})
        arr = s.call("echo", (np.arange(4.0),), {})
        assert polybus.wait(p) == 6
        # inside a list and a dict (keyword arguments: the general path)
        assert polybus.wait(s.call("echo", (), {"x": {"v": [p, 1]}})) == {"v": [6, 1]}
        assert polybus.wait(s.call("scale", ([p], 2), {})) == [6, 6]
        h = polybus.broadcast(arr)  # a promise of an array: its value goes to every replica
        assert np.array_equal(polybus.wait(s.call("echo", (h,), {})), np.arange(4.0))


def test_a_promise_of_an_open_batch_inside_an_argument(tmp_path: Path) -> None:
    # Waited for when the call is made: waited for only while its batch was being
    # written, it waited for that very batch, never sent (the client hung).
    with cluster(tmp_path, TOML, replicas=1) as c:
        s = c.session()
        p = s.call("scale", (3, 2), {})  # its batch stays open (linger 60 s)
        q = s.call("scale", ([p, 1], 2), {})
        r = s.call("echo", ({"k": (p,)},), {})
        assert polybus.wait(q) == [6, 1, 6, 1] and polybus.wait(r) == {"k": [6]}


def test_a_promise_inside_an_argument_of_an_unaggregated_call(tmp_path: Path) -> None:
    # The general path waits for a promise inside a list/dict argument when the call is
    # made, before any send lock is taken: waited for while its message was being
    # encoded (that link's send lock held), a wait that had to send on the same link
    # (here: write the open batch) deadlocked.
    import threading

    toml = TOML.replace('use.echo = { callstyle = "async", aggregate = "1KiB", linger = "60s" }',
                        'use.echo = { callstyle = "async" }')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        got: list[Any] = []
        p = s.call("scale", (3, 2), {})  # its batch stays open (linger 60 s)

        def run() -> None:
            got.append(polybus.wait(s.call("echo", ([p, 1, {"k": (p,)}],), {})))
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "the call with a promise inside its argument hung"
        assert got == [[6, 1, {"k": [6]}]]


@pytest.mark.parametrize("style", ["async-demand(2)", "async"])
def test_threads_sharing_an_aggregating_binding_each_get_their_answers(
        tmp_path: Path, style: str) -> None:
    # Program threads, the thread reading answers (which places queued batches) and the
    # linger timer share the binding's open batch and queue. Unguarded, two threads
    # took the same queued batch (IndexError in one) and placed it twice, or gave two
    # calls one slot in a batch: a program of 8 threads x 2000 calls hung for good.
    import threading

    from polybus.client.completion import as_completed

    toml = TOML.replace('use.scale = { callstyle = "async-demand(1)", aggregate = 16, '
                        'linger = "60s" }',
                        f'use.scale = {{ callstyle = "{style}", aggregate = 8, '
                        'linger = "1ms" }')
    assert style in toml
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        n, threads = 600, 4
        got: dict[int, list[int]] = {}
        errors: list[BaseException] = []

        def run(k: int) -> None:
            try:
                ps = [s.call("scale", (k * n + i, 2), {}) for i in range(n)]
                got[k] = sorted(int(p) for p in as_completed(ps, timeout=30))
            except BaseException as exc:  # (reported below, not lost in the thread)
                errors.append(exc)

        ts = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(45)
        assert not any(t.is_alive() for t in ts), "threads calling one binding hung"
        assert errors == []
        assert got == {k: [2 * (k * n + i) for i in range(n)] for k in range(threads)}


def test_a_batch_refused_whole_fails_each_of_its_calls(tmp_path: Path) -> None:
    """A replica that takes none of a batch (its queue full, overflow "reject") answers
    one Fail with the batch's id. The reactor filed it as a call's and looked for the
    batch's forwarder, which a Batcher lacked: an AttributeError inside polybus reached
    whichever program thread was reading answers."""
    toml = TOML.replace('replication = 2', 'replication = 2\n'
                        'define.nap = { queue = 1, overflow = "reject" }\n'
                        'define.scale = { queue = 1 }\ndefine.echo = { queue = 1 }').replace(
        'use.nap = { callstyle = "async-demand(1)"', 'use.nap = { callstyle = "async"')
    with cluster(tmp_path, toml, replicas=1) as c:
        s = c.session()
        out = [s.call("nap", (i, 0.3), {}) for i in range(12)]  # 3 batches of 4
        outcomes: list[Any] = []
        for p in out:
            try:
                outcomes.append(polybus.wait(p))
            except BusyError as exc:
                outcomes.append(type(exc).__name__)
        # (one runs and the next waits in the queue of 1; the last is refused unless
        # the first had ended by then)
        batches = [outcomes[i:i + 4] for i in (0, 4, 8)]
        ran = [b for b in batches if b != ["BusyError"] * 4]
        assert all(b == list(range(b[0], b[0] + 4)) for b in ran), outcomes
        assert 1 <= len(ran) < 3 and c.runtimes[0].calls == 4 * len(ran)
