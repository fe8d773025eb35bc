"""The reactor's control traffic: a request that waits for its answer by ``req`` (stats,
a forwarded value fetched back), and the liveness pings of replicas gone silent
(client/liveness.py decides which; this sends and gives up)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from polybus.client import rings
from polybus.client.later import get_ident
from polybus.errors import ConnectionLostError
from polybus.transport.stalls import frame_part
from polybus.wire.messages import Message, Ping

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.reactor import Reactor

__all__ = ["check_liveness", "request"]


def request(r: Reactor, link: ReplicaLink, msg: Message, req: int,
            timeout: float) -> Message | None:
    """Send ``msg`` to ``link`` and wait, reading, for the answer with the same ``req``
    (None: none came within ``timeout`` s, or the replica went). Each read is followed
    by what follows every read (`Reactor._stepped`): a call that the answers it took made
    room for is placed (a backlog), as after a wait's read. Left at the client, a wait
    that followed for a call on another replica alone read that replica alone, and never
    placed it: a consumer there waiting on its producer's value waited until a liveness
    ping's answer ended that read (two heartbeats)."""
    r.send(link, msg)
    deadline = time.monotonic() + timeout
    while req not in r.replies and not link.dead and time.monotonic() < deadline:
        if r._lock.acquire(blocking=False):
            r._reader = get_ident()
            try:
                for lk in rings.down(r._rings) or [key.data for key, _ in r._sel.select(0.05)]:
                    if not lk.dead:
                        r._receive(lk, wait=False)
            finally:
                rings.up(r._rings)
                r._reader = None
                r._lock.release()
            r._stepped()
        else:
            time.sleep(0.001)
    return r.replies.pop(req, None)


def check_liveness(r: Reactor) -> None:
    """Ping replicas that hold calls and went silent; give up on those silent too long."""
    live = r.liveness
    assert live is not None
    ping, dead = live.check(((lk, lk.channel.bytes_received, bool(lk.outstanding))
                             for lk in r.links if not lk.dead), time.monotonic())
    for link in dead:
        # (stopped in the middle of a frame, an answer begun: said so)
        begun = link.channel.decoder.begun()
        said = "nothing" if begun is None else f"{frame_part(begun)} and nothing more"
        # Closed: answers it sends after all are never read, so none is taken twice.
        # Its address said: which host went silent (one cut off by the network).
        r._lost(link, ConnectionLostError(
            f"{link.name} at {link.channel.peer} sent {said} for "
            f"{live.misses * live.heartbeat:g} s while "
            f"holding calls (heartbeat {live.heartbeat:g} s); taken for dead",
            heartbeat=live.heartbeat))
    for link in ping:
        if not link.dead:
            r.send(link, Ping(0))  # req 0: no one waits for this Pong by name
