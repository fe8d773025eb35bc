"""A control request's reads (a forwarded value fetched back, stats, a cancel's Revoke)
are followed by the after-step work, as every other read is: a call in an
``async-demand`` backlog that an answer they took made room for is placed then.

They were not: the answer was filed, the call stayed at the client, and a wait that
followed, for a call on another replica alone, read that replica alone and never placed
it. Where that call waited on the one left behind (a pipeline's consumer, forwarded its
producer's value replica to replica), nothing moved until the liveness check pinged
that replica and its Pong ended the lone read: two heartbeats (2 s by default) each
time, a few times a run, for good with a long heartbeat (found by
tests/integration/stratmix.py, runs past its limit waiting for a consumer: the program
fetches an even producer's value, and the next odd consumer's producer was left in its
binding's backlog). No polybus worker: two replicas by hand over tcp on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import select
import socket
import threading

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.testing.peers import next_message, serve_one
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Ping, Pong, Result

TOKEN = b"request-refills-token-0123456789a"
WAIT = 15.0  # the most anything below is waited for

_reqs = itertools.count(1 << 41)


def test_a_request_places_the_backlog_call_its_reads_made_room_for() -> None:
    la, lb = (socket.create_server(("127.0.0.1", 0)) for _ in range(2))
    held: list[Channel] = []
    go = threading.Event()       # A may answer its first call
    got_second = threading.Event()
    heard_a: list[object] = []
    answered_q: list[bool] = []  # whether A had the second call when B answered q

    def serve_a(ch: Channel) -> None:  # the producers' replica
        first = next_message(ch, WAIT)
        heard_a.append(first)
        assert type(first) is Call
        go.wait(WAIT)
        ch.send(Result(first.id, "first"))
        second = next_message(ch, WAIT)
        heard_a.append(second)
        if type(second) is Call:
            got_second.set()
            ch.send(Result(second.id, "second"))

    def serve_b(ch: Channel) -> None:  # the consumer's: it answers once the second
        q = next_message(ch, WAIT)     # producer runs (or, past WAIT, so the test ends)
        ping = next_message(ch, WAIT)
        assert type(q) is Call and type(ping) is Ping
        ch.send(Pong(ping.req))
        answered_q.append(got_second.wait(WAIT))
        ch.send(Result(q.id, "q"))

    threads = [serve_one(la, TOKEN, held, serve_a), serve_one(lb, TOKEN, held, serve_b)]
    reactor = Reactor()
    try:
        a = ReplicaLink("a", "m", connect(f"tcp://127.0.0.1:{la.getsockname()[1]}", TOKEN,
                                          Codec()))
        b = ReplicaLink("b", "n", connect(f"tcp://127.0.0.1:{lb.getsockname()[1]}", TOKEN,
                                          Codec()))
        reactor.add(a)
        reactor.add(b)
        f = Dispatcher("f", reactor, [a], CallStyle("async-demand", 1))
        g = Dispatcher("g", reactor, [b], CallStyle("async", None))
        reactor.refills = True  # (as a session with an async-demand binding has it)
        reactor.after_step = f.refill
        p1 = f((1,), {})
        p2 = f((2,), {})  # no room on a: in f's backlog
        assert len(f._backlog) == 1
        q = g((3,), {})
        go.set()
        # A's answer is there before the request reads: the request's reads take it
        assert select.select([a.channel.sock], [], [], WAIT)[0]
        req = next(_reqs)
        assert type(reactor.request(b, Ping(req), req, WAIT)) is Pong
        # Nothing else in flight but q on b: the wait reads b alone (the lone path)
        assert wait(q) == "q"
        assert answered_q == [True], (
            "the call the request's read made room for stayed in its backlog: a was "
            f"sent {heard_a[1:] or 'nothing more'} while the wait for q read b alone")
        assert wait(p1, timeout=WAIT) == "first"
        assert wait(p2, timeout=WAIT) == "second"
    finally:
        go.set()
        got_second.set()
        reactor.close()
        for t in threads:
            t.join(WAIT)
        for ch in held:
            ch.close()
        la.close()
        lb.close()
