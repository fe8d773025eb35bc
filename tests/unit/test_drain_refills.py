"""The reads a send makes while its connection is full (client/sending.py `_drain`) are
followed, before any read that waits on one replica alone, by the after-step work: a
call in an ``async-demand`` backlog that an answer they took made room for is placed.

A send never places other calls from inside itself, so those reads leave that work for
later; nothing made it come before a following wait for a call on another replica
alone, which read that replica alone (the lone path) and never placed it. Where that
call waits on the one left behind (a consumer on its producer), nothing moved until a
liveness ping's answer ended that read (two heartbeats), or for ever with no liveness
check. No polybus worker: two replicas by hand over tcp on 127.0.0.1 (as
tests/unit/test_request_refills.py does for a control request's reads).
"""

from __future__ import annotations

import socket
import threading

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.testing.peers import next_message, serve_one
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result

TOKEN = b"drain-refills-token-0123456789abc"
WAIT = 15.0  # the most anything below is waited for
BIG = 16 << 20  # more than a loopback connection takes with its reader not reading


def test_a_wait_after_a_full_send_places_the_backlog_call_its_reads_made_room_for() -> None:
    la, lc = (socket.create_server(("127.0.0.1", 0)) for _ in range(2))
    held: list[Channel] = []
    sending = threading.Event()    # c took its first call: q's send comes next
    a_sent = threading.Event()     # a's first answer is on its way to the client
    answered = threading.Event()   # the client filed a's first answer (the read made room)
    got_second = threading.Event()
    heard_a: list[object] = []
    in_send: list[int] = []        # sends under way when that answer was filed
    answered_q: list[bool] = []    # whether a had the second call when c answered q

    def serve_a(ch: Channel) -> None:  # the producers' replica: answers the first once
        first = next_message(ch, WAIT)  # q's send waits for room
        heard_a.append(first)
        assert type(first) is Call
        sending.wait(WAIT)
        ch.send(Result(first.id, "first"))
        a_sent.set()
        second = next_message(ch, WAIT)
        heard_a.append(second)
        if type(second) is Call:
            got_second.set()
            ch.send(Result(second.id, "second"))

    def serve_c(ch: Channel) -> None:
        q0 = next_message(ch, WAIT)
        assert type(q0) is Call
        sending.set()
        a_sent.wait(WAIT)
        # Its answer to q0 is what wakes q's full send to read (Channel._wait_writable
        # looks at its own connection), and that read takes a's answer too
        ch.send(Result(q0.id, "q0"))
        answered.wait(WAIT)            # reads nothing more until the client took a's
        q = next_message(ch, WAIT)     # answer, then answers q once the second producer
        assert type(q) is Call         # runs (or, past WAIT, so the test ends)
        answered_q.append(got_second.wait(WAIT))
        ch.send(Result(q.id, "q"))

    threads = [serve_one(la, TOKEN, held, serve_a), serve_one(lc, TOKEN, held, serve_c)]
    reactor = Reactor()
    try:
        a = ReplicaLink("a", "m", connect(f"tcp://127.0.0.1:{la.getsockname()[1]}", TOKEN,
                                          Codec()))
        c = ReplicaLink("c", "n", connect(f"tcp://127.0.0.1:{lc.getsockname()[1]}", TOKEN,
                                          Codec()))
        reactor.add(a)
        reactor.add(c)
        f = Dispatcher("f", reactor, [a], CallStyle("async-demand", 1))
        g = Dispatcher("g", reactor, [c], CallStyle("async", None))
        reactor.refills = True  # (as a session with an async-demand binding has it)
        reactor.after_step = f.refill
        filed = f.completed

        def completed(rec: CallRecord, link: ReplicaLink) -> None:
            filed(rec, link)
            in_send.append(reactor._in_send)
            answered.set()

        f.completed = completed  # type: ignore[method-assign]
        p1 = f((1,), {})
        p2 = f((2,), {})  # no room on a: in f's backlog
        assert len(f._backlog) == 1
        q0 = g((0,), {})
        # a answers once c took q0: q's send, waiting for room, reads its answer
        q = g((b"x" * BIG,), {})
        assert in_send == [1], "a's answer was not taken by the reads of q's full send"
        # Nothing else in flight but q on c: the wait may read c alone (the lone path)
        assert wait(q) == "q"
        assert answered_q == [True], (
            "the call the send's reads made room for stayed in its backlog: a was "
            f"sent {heard_a[1:] or 'nothing more'} while the wait for q read c alone")
        assert wait(q0, timeout=WAIT) == "q0"
        assert wait(p1, timeout=WAIT) == "first"
        assert wait(p2, timeout=WAIT) == "second"
    finally:
        sending.set()
        a_sent.set()
        answered.set()
        got_second.set()
        reactor.close()
        for t in threads:
            t.join(WAIT)
        for ch in held:
            ch.close()
        la.close()
        lc.close()
