"""The client's side of the shm rings' awake flags (transport/ring.py, docs/protocol.md).

A replica writing an answer rings a doorbell (a system call, and a wake-up here) only
when the client's flag for that ring is down. The reactor keeps the flags up while the
client runs (`up`, on the way out of every read, the read lock held) and takes them
down, with a fence and a last look, before it blocks (`down`): in an async burst the
answers come while the client is still sending, and each rang a doorbell (~1/6 of a
replica's time per call in matmul n=10 over shm). A wait on several replicas spins on
their rings first (`spin_busy`).
"""

from __future__ import annotations

from polybus.client.calls import ReplicaLink
from polybus.transport.ring import fence
from polybus.transport.shm import ShmChannel, spin

Rings = list[tuple[ReplicaLink, ShmChannel]]


def up(rings: Rings) -> None:
    """The client runs on and looks at every ring before it next sleeps."""
    for link, ch in rings:
        if not link.dead:
            ch.stay_awake(True)


def down(rings: Rings) -> list[ReplicaLink]:
    """Before a blocking select: every flag down, a fence, a last look (ring.py); the
    links with frames waiting."""
    live = [(link, ch) for link, ch in rings if not link.dead]
    if not live:
        return []
    for _, ch in live:
        ch.stay_awake(False)
    fence()
    return [link for link, ch in live if ch.ring_ready()]


def waiting(rings: Rings, skip: list[ReplicaLink]) -> list[ReplicaLink]:
    """Links (not in ``skip``) with frames in their ring, flags left as they are."""
    return [link for link, ch in rings if not link.dead and link not in skip and ch.ring_ready()]


def spin_busy(busy: list[ReplicaLink], most: float) -> list[ReplicaLink]:
    """Several replicas over shm owe answers: look at their rings (no system call) for
    the spin window, at most ``most`` s, before the blocking select, which costs a 25-35
    us wake (spinning.py) and the replica a doorbell. Not over sockets: a look is a
    select there, and spinning so slowed matmul over tcp. The links with frames waiting."""
    chans = [lk.channel for lk in busy if type(lk.channel) is ShmChannel]
    seconds = min(max(lk.channel.spin_s for lk in busy), most)
    if len(chans) < len(busy) or not seconds:
        return []
    by_channel = {id(lk.channel): lk for lk in busy}
    return [by_channel[id(ch)] for ch in spin(chans, seconds)]
