"""What a replica holds back is let go within its bound, also when the replica was idle
and a long call runs behind it: a bell held at a client's ``coalesce`` (shm,
worker/bells.py) within ``coalesce``, a tiny answer corked while more calls wait
(worker/replies.py) within 2 ms. No thread of the replica polls while that long call
runs (one handler), and its standby, which lets go what falls due behind a long call,
looks at an idle replica only every so often (up to 100 ms apart). Before, what was
held waited for that look: a 0-second call's answer, its bell held for 1 ms, woke a
sleeping client 78-84 ms after it was sent (8 runs of one round each).

And what is held as the replica stops is written before it closes its connections.

The standby here looks only every 30 s, so what waited for its look would come long
after the test's bound; the bound itself (the hold + 5 s) is no speed figure. The
client is in this process, asleep on its socket (over shm its awake flag is down: the
held answer's doorbell is what wakes it); the replica in this process too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polybus.testing.peers import next_message
from polybus.transport import ring as ring_mod
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.transport.ready import readable
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Result
from polybus.worker.options import ServeOptions
from polybus.worker.replies import CORK_BYTES, CORK_HOLD_S
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"held-bell-token-0123456789abcdef"
COALESCE_S = 0.005
MARGIN_S = 5.0
BIG = bytes(CORK_BYTES + 1)  # (an answer too large to cork)


class _Replica:
    """A replica whose ``long`` call runs until the test lets it end (``release``),
    whose standby looks every ``look_s``, and what it held: ``held``, "bell" or "cork"
    each. ``big`` answers bytes too many to cork, ``tiny`` a small int."""

    def __init__(self, where: str, short_s: float, look_s: float = 30.0) -> None:
        self.release = threading.Event()

        def short() -> int:
            if short_s:  # (a call of some length: its answer is not corked)
                time.sleep(short_s)
            return 1

        def long() -> int:
            self.release.wait(60)
            return 2

        def big() -> bytes:
            return BIG

        def tiny() -> int:
            return 1

        self.rt = WorkerRuntime("w", {"short": short, "long": long, "big": big, "tiny": tiny},
                                TOKEN, address=where, options=ServeOptions(spin_s=0.0))
        self.rt.standby_look_s = self.rt.standby_idle_s = look_s
        self.held: list[str] = []
        self._seen(self.rt._bells, "answer", "bell")
        self._seen(self.rt._corked, "hold", "cork")

    def _seen(self, holder: Any, method: str, what: str) -> None:
        real = getattr(holder, method)

        def seen(*args: Any) -> Any:
            self.held.append(what)
            return real(*args)

        setattr(holder, method, seen)


@pytest.fixture
def replica(request: pytest.FixtureRequest, short_tmp: Path) -> Iterator[_Replica]:
    scheme, short_s = request.param
    if scheme == "shm" and not ring_mod.supported():
        pytest.skip("the shm ring needs x86-64")
    r = _Replica("tcp://127.0.0.1:0" if scheme == "tcp" else f"shm://{short_tmp}/w.shm",
                 short_s)
    r.rt.start()
    try:
        yield r
    finally:
        r.release.set()
        r.rt.stop()


@pytest.mark.parametrize(("replica", "what", "bound"), [
    (("shm", 0.001), "bell", COALESCE_S), (("tcp", 0.0), "cork", CORK_HOLD_S)],
    indirect=["replica"], ids=["shm-bell", "tcp-cork"])
def test_what_is_held_is_let_go_in_time_with_a_long_call_behind_it(
        replica: _Replica, what: str, bound: float) -> None:
    ch: Channel = connect(replica.rt.address, TOKEN, Codec())
    try:
        ch.spin_s = 0.0
        if what == "bell":
            ch.coalesce(COALESCE_S)
            # (the replica's ring first: its descriptor comes on the socket, taken here)
            assert readable(ch.sock, 10.0)
            ch.fill(wait=False)
        ch.send_many([Call(1, "short", []), Call(2, "long", [])])
        # The short call's answer is held while the long call waits in the queue; then
        # the long call runs and no one polls.
        came = readable(ch.sock, bound + MARGIN_S)
        assert replica.held == [what], f"held: {replica.held}"
        assert came, f"what was held did not come within {bound + MARGIN_S} s"
        assert next_message(ch, limit=10.0) == Result(1, 1)
        replica.release.set()
        assert next_message(ch, limit=10.0) == Result(2, 2)
    finally:
        ch.close()


def _asleep_next(ch: Channel, limit: float) -> Message | None:
    """The next message on ``ch`` within ``limit`` s, this side asleep on its socket
    meanwhile, its awake flag down (`wait_readable`), never spinning on its ring."""
    deadline = time.monotonic() + limit
    while (msg := ch.next_message()) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if ch.wait_readable(left):
            ch.fill(wait=False)
    return msg


def test_an_answer_corked_while_a_bell_is_owed_for_later_is_let_go_in_time(
        short_tmp: Path) -> None:
    """A bell owed already (held at a ``coalesce`` longer than the standby's sleep, so
    the standby was not told of it) and then a tiny answer corked, due in 2 ms: the
    standby is told of the cork, which falls due first. (It was told only of what was
    held where nothing was: the corked answer waited for the standby's next look.)"""
    if not ring_mod.supported():
        pytest.skip("the shm ring needs x86-64")
    r = _Replica(f"shm://{short_tmp}/w.shm", 0.0, look_s=60.0)
    r.rt.start()
    ch: Channel = connect(r.rt.address, TOKEN, Codec())
    try:
        ch.spin_s = 0.0
        ch.coalesce(120.0)  # (the bell of big's answer is due after the standby's look)
        assert readable(ch.sock, 10.0)  # (the replica's ring first, as above)
        ch.fill(wait=False)
        # Calls of a few us each, so that a tiny answer is corked (replies.py: a replica
        # whose calls take under 100 us on average corks), one at a time: none held.
        for i in range(1, 501):
            ch.send(Call(i, "tiny", []))
            assert next_message(ch, limit=10.0) == Result(i, 1)
        assert r.held == []
        ch.send_many([Call(1001, "big", []), Call(1002, "tiny", []), Call(1003, "long", [])])
        # (this side asleep, its flag down: big's bell is owed; the corked answer, once
        # written, rings, and both are read then)
        got = [_asleep_next(ch, CORK_HOLD_S + MARGIN_S) for _ in range(2)]
        assert r.held == ["bell", "cork"], f"held: {r.held}"
        said = [m if not isinstance(m, Result) else (m.id, len(m.value) if m.id == 1001
                                                     else m.value) for m in got]
        assert said == [(1001, len(BIG)), (1002, 1)], \
            f"the corked answer did not come within {CORK_HOLD_S + MARGIN_S} s: {said}"
        r.release.set()
        assert next_message(ch, limit=10.0) == Result(1003, 2)
    finally:
        ch.close()
        r.release.set()
        r.rt.stop()


def test_an_answer_held_as_the_replica_stops_is_written_before_its_connections_close(
        short_tmp: Path) -> None:
    """A call that ends during the replica's stop, while another waits in its queue:
    its answer, corked (more calls wait), is written before the stop closes the
    connections. (No thread let it go: the pool's thread left at the stop, the standby
    before it; the client lost the answer of a call that ran.)"""
    r = _Replica("tcp://127.0.0.1:0", 0.0)
    stopped: list[int] = []

    def stopping() -> int:  # (runs as the replica's one handler's call)
        threading.Thread(target=lambda: stopped.append(r.rt.stop(grace=10.0)),
                         daemon=True).start()
        r.rt._stop_event.wait(10.0)  # (until the stop has begun)
        return 3

    r.rt.functions["stopping"] = stopping
    r.rt.start()
    ch: Channel = connect(r.rt.address, TOKEN, Codec())
    try:
        for i in range(1, 2001):  # (calls of a few us: the answer below is corked)
            ch.send(Call(i, "tiny", []))
            assert next_message(ch, limit=10.0) == Result(i, 1)
        ch.send_many([Call(3001, "stopping", []), Call(3002, "tiny", [])])
        got = next_message(ch, limit=10.0, closed="closed")
        assert r.held == ["cork"], f"held: {r.held}"
        assert got == Result(3001, 3), f"got {got}"
    finally:
        ch.close()
        r.rt.stop()
