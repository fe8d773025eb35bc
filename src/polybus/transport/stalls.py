"""A peer that stops in the middle of a frame: found where its connections are looked at.

A peer past the handshake that sends part of a frame (its length alone, or some of its
bytes) and then nothing more (a process stopped with SIGSTOP as it wrote, a buggy
peer) would hold its connection for ever: over ``ipc`` and ``shm`` the kernel always
knows the peer is alive, and over tcp its kernel answers the keepalive probes
(keepalive.py), nothing written to it waiting for an acknowledgement. Held with it: the
memory set aside for the frame (a large frame's whole body, from its length alone), a
replica's calls of that client queued, a registry's thread.

A frame begun must keep making progress. Nothing is timed on the receive path (a clock
read per frame is a measurable share of a replica's lone call): whoever already looks
at its connections every half heartbeat or so passes those whose decoder is not empty
to `Stalls.look`, which reads each one's received-byte counter and the frame begun
(`FrameDecoder.begun`). A connection seen with the same count and the same frame begun
for `bound_s` (``HEARTBEATS`` heartbeats, as a peer holding data is taken for cut off:
keepalive.py) is said stalled; a byte of progress, however slow, starts it over. Its
owner cuts it (`Channel.cut`), and whoever reads it finds it ended and drops it as a
peer that closed. The silence is counted from the first look that saw it, so a frame
is said stalled between the bound and the bound plus one look's interval after its last
byte, never before.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterable
from typing import Any

from polybus.transport.channel import Channel
from polybus.transport.keepalive import PROBES

__all__ = ["HEARTBEATS", "Stalls", "bound_s", "frame_part", "unread"]

HEARTBEATS = PROBES + 1  # heartbeats with no byte of a frame begun before its peer is dropped


def bound_s(heartbeat: float) -> float:
    """How long a frame begun may go without a byte (no kernel timer here: not rounded
    to whole seconds, as keepalive.py's bounds are)."""
    return HEARTBEATS * heartbeat


def unread(ch: Channel) -> bool:
    """Bytes wait for ``ch``'s reader (in its socket, or its shm ring): the peer has sent
    more, which no one has read yet (a look, no read; a system call)."""
    ring_ready = getattr(ch, "ring_ready", None)
    if ring_ready is not None and ring_ready():
        return True
    try:
        look = select.poll()
        look.register(ch.sock.fileno(), select.POLLIN)
        return bool(look.poll(0))
    except (OSError, ValueError):  # (closed meanwhile: its reader finds so)
        return False


def frame_part(begun: tuple[int, int]) -> str:
    """What a peer sent of the frame it began (`FrameDecoder.begun`), for a log line:
    ``12 of a 4,194,304-byte frame``."""
    have, size = begun
    if not size:
        return f"{have} of the 4 bytes of a frame's length"
    return f"{have:,} of a {size:,}-byte frame"


class Stalls:
    """Connections whose frame begun has stopped coming, looked at from time to time."""

    def __init__(self, heartbeat: float, waiting: Callable[[Channel], bool] = unread) -> None:
        self.heartbeat = heartbeat
        self.bound = bound_s(heartbeat)
        self._waiting = waiting
        # Each connection with a frame begun at the last look: its received-byte count
        # and its frame then, and the first look that saw them so.
        self._seen: dict[Any, tuple[int, tuple[int, int], float]] = {}

    def look(self, channels: Iterable[Channel], now: float) -> list[tuple[Channel, str]]:
        """Of ``channels`` (those being read: not one its owner has stopped reading),
        those whose frame begun has had no byte for the bound, each with what to say of
        it (``sent 12 of a 4,194,304-byte frame and nothing more for 4.0 s``); the owner
        cuts them. Connections not passed are forgotten."""
        seen, self._seen = self._seen, {}
        stalled: list[tuple[Channel, str]] = []
        for ch in channels:
            decoder = ch.decoder
            if ch.closed or decoder.empty:
                continue
            count = ch.bytes_received  # (first: a byte that comes as the frame is read
            begun = decoder.begun()    # makes the next look's count differ)
            if begun is None:  # whole frames, not yet taken
                continue
            was = seen.get(ch)
            since = was[2] if was is not None and was[:2] == (count, begun) else now
            if now - since >= self.bound and not self._waiting(ch):
                stalled.append((ch, f"sent {frame_part(begun)} and nothing more for {now - since:.1f} s"))
                continue
            self._seen[ch] = (count, begun, since)
        return stalled
