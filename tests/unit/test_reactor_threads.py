"""The reactor with several client threads: a thread waiting on one replica never keeps
another thread's replica unread (and so unheard, for liveness)."""

from __future__ import annotations

import select
import socket
import threading
from typing import Any

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.reactor import Reactor
from polybus.errors import PolybusError
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Ping, Pong, Result


class _Dispatcher:
    interface = "x"
    comm = None
    timeout = None

    def completed(self, rec: CallRecord, link: ReplicaLink) -> None:
        pass


def _serve(ch: Channel, stop: threading.Event, answer: tuple[int, Any] | None = None,
           release: threading.Event | None = None) -> None:
    """Answer pings; send ``answer`` once ``release`` is set (at once if there is none)."""
    pending = answer
    while not stop.is_set():
        if pending is not None and (release is None or release.is_set()):
            ch.send(Result(*pending))
            pending = None
        if select.select([ch.sock], [], [], 0.02)[0]:
            try:
                for m in ch.receive(wait=False):
                    if isinstance(m, Ping):
                        ch.send(Pong(m.req))
            except PolybusError:
                return


def test_a_second_thread_is_answered_while_the_first_waits_on_a_quiet_replica() -> None:
    reactor = Reactor(heartbeat=0.1)
    lost: list[str] = []
    reactor.on_lost = lambda link, err: lost.append(f"{link.name}: {err}")
    socks, servers, links = [], [], []
    for name in ("L", "M"):
        a, b = socket.socketpair()
        socks += [a, b]
        link = ReplicaLink(name, "m", Channel(a, Codec(), name))
        reactor.add(link)
        links.append(link)
        servers.append(Channel(b, Codec(), f"server {name}"))
    slow, fast = links
    d: Any = _Dispatcher()
    stop, b_done = threading.Event(), threading.Event()
    threads = [threading.Thread(target=_serve, args=(servers[0], stop, (1, 42), b_done)),
               threading.Thread(target=_serve, args=(servers[1], stop))]
    out: dict[str, Any] = {}
    try:
        for t in threads:
            t.start()
        ra = CallRecord(1, d, [], None, 0.0)
        ra.link = slow
        slow.outstanding[1] = ra
        waiter = threading.Thread(target=lambda: out.__setitem__("A", reactor.wait(ra)))
        waiter.start()  # waits on L, which stays quiet until B has its answer
        rb = CallRecord(2, d, [], None, 0.0)
        rb.link = fast
        fast.outstanding[2] = rb
        servers[1].send(Result(2, 7))
        out["B"] = reactor.wait(rb, timeout=10.0)
        b_done.set()
        waiter.join(10.0)
        assert out == {"A": 42, "B": 7}
        assert lost == []  # M answered pings all along: never taken for dead
    finally:
        b_done.set()
        stop.set()
        for t in threads:
            t.join(5.0)
        reactor.close()
        for s in socks:
            s.close()


def test_a_step_takes_answers_already_read_before_it_sleeps() -> None:
    """Two answers come in one read; the wait for the first takes only its own and
    leaves the second whole in the link's decoder. The next step (the run's last drain)
    must take it rather than sleep on a socket that has nothing more to say: it slept
    until the heartbeat's ping brought bytes (1.5 s at the end of a run)."""
    reactor = Reactor()  # (no heartbeat: nothing else would ever come)
    a, b = socket.socketpair()
    link = ReplicaLink("L", "m", Channel(a, Codec(), "L"))
    reactor.add(link)
    server = Channel(b, Codec(), "server")
    d: Any = _Dispatcher()
    try:
        first, second = CallRecord(1, d, [], None, 0.0), CallRecord(2, d, [], None, 0.0)
        for rec in (first, second):
            rec.link = link
            link.outstanding[rec.id] = rec
        server.send_many([Result(1, 10), Result(2, 20)])
        assert reactor.wait(first) == 10
        reactor.step(None, 5.0)  # (bounded: with nothing taken, it returns after 5 s)
        assert second.done and second.outcome() == 20
    finally:
        reactor.close()
        b.close()


def test_a_partial_frame_on_one_link_leaves_the_others_read() -> None:
    """A frame only partly read sits in L's decoder; M's whole answer waits in its
    socket. One step must read M, not return at once on L's leftovers (it did, looping
    at full CPU with M unread, until L's frame was whole: liveness then took M for dead)."""
    reactor = Reactor()
    pairs = [socket.socketpair() for _ in range(2)]
    links = [ReplicaLink(n, "m", Channel(p[0], Codec(), n)) for n, p in zip("LM", pairs, strict=True)]
    for link in links:
        reactor.add(link)
    d: Any = _Dispatcher()
    try:
        recs = [CallRecord(i + 1, d, [], None, 0.0) for i in range(2)]
        for rec, link in zip(recs, links, strict=True):
            rec.link = link
            link.outstanding[rec.id] = rec
        c, e = socket.socketpair()  # the bytes of one frame, taken from a channel
        Channel(c, Codec(), "s").send(Result(1, "x" * 100))
        frame = e.recv(1 << 16)
        c.close()
        e.close()
        pairs[0][1].sendall(frame[:10])
        reactor.poll()
        assert links[0].channel.buffered() and not recs[0].done  # (the part read)
        Channel(pairs[1][1], Codec(), "M").send(Result(2, 22))
        reactor.step(None, 5.0)
        assert recs[1].done and recs[1].outcome() == 22
        pairs[0][1].sendall(frame[10:])
        reactor.step(None, 5.0)
        assert recs[0].outcome() == "x" * 100
    finally:
        reactor.close()
        for p in pairs:
            p[1].close()
