"""The decision behind dropping a peer stalled in the middle of a frame
(transport/stalls.py), without sockets: time is an argument, a connection is its
decoder and its received-byte count. The replica's and the registry's use of it, over
real connections: test_stalled_frames.py, test_stalled_frames_registry.py."""

from __future__ import annotations

import struct
from typing import Any, cast

from polybus.transport.channel import Channel
from polybus.transport.stalls import HEARTBEATS, Stalls, bound_s
from polybus.wire.codec import Codec
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import Call

HEARTBEAT = 1.0
LOOK = HEARTBEAT / 2  # (as often as a replica looks)


class Conn:
    """What `Stalls.look` reads of a connection."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.bytes_received = 0
        self.closed = False

    def feed(self, data: bytes) -> None:
        self.decoder.feed(data)
        self.bytes_received += len(data)


def _frame(n: int = 0) -> bytes:
    return b"".join(bytes(p) for p in Codec().encode(Call(n, "f", [n])))


def _looks(stalls: Stalls, conns: list[Conn], start: float, end: float,
           between: Any = None) -> list[tuple[float, Conn, str]]:
    """Look every LOOK s from ``start`` to ``end``; ``between(t)`` runs before each."""
    said = []
    t = start
    while t <= end + 1e-9:
        if between is not None:
            between(t)
        said += [(t, cast(Conn, ch), what)
                 for ch, what in stalls.look(cast(list[Channel], conns), t)]
        t += LOOK
    return said


def test_the_bound_is_four_heartbeats_unrounded() -> None:
    assert HEARTBEATS == 4
    assert bound_s(1.0) == 4.0 and bound_s(0.25) == 1.0  # (no kernel timer: not whole seconds)


def test_a_frame_stalled_is_said_once_at_the_bound_never_before() -> None:
    c = Conn()
    c.feed(struct.pack("<IHHI", 4 * 1024 * 1024 - 4, 0, 0, 0))
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    said = _looks(stalls, [c], 10.0, 10.0 + 3.5)
    assert said == []  # (3.5 s after the first look that saw it)
    said = _looks(stalls, [c], 14.0, 14.0)
    assert said == [(14.0, c, "sent 12 of a 4,194,304-byte frame and nothing more for 4.0 s")]
    # Said, it is forgotten (its owner cuts it): looked at again, it starts over.
    assert _looks(stalls, [c], 14.5, 18.0) == []


def test_a_frame_moving_however_slowly_is_never_said() -> None:
    c = Conn()
    body = struct.pack("<IHHI", 200_000, 0, 0, 0) + bytes(200)
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    fed = iter(range(len(body)))

    def trickle(t: float) -> None:
        if int(t * 2) % 7 == 0:  # a byte every 3.5 s: under the bound, by a look
            i = next(fed)
            c.feed(body[i:i + 1])

    assert _looks(stalls, [c], 0.0, 60.0, trickle) == []


def test_a_length_not_yet_whole_is_said_as_such() -> None:
    c = Conn()
    c.feed(_frame(1) + b"\x10\x00")  # (a whole frame, not yet taken, then 2 bytes)
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    said = _looks(stalls, [c], 0.0, 4.0)
    assert [w for _, _, w in said] == [
        "sent 2 of the 4 bytes of a frame's length and nothing more for 4.0 s"]


def test_whole_frames_not_yet_taken_are_no_frame_begun() -> None:
    c = Conn()
    c.feed(_frame(1) + _frame(2))
    assert c.decoder.begun() is None and not c.decoder.empty
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    assert _looks(stalls, [c], 0.0, 20.0) == []


def test_bytes_waiting_unread_are_progress_to_come() -> None:
    """Bytes the peer sent that no one has read yet (a reader held up): not stalled."""
    c = Conn()
    c.feed(b"\x10\x00")
    waiting = [True]
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: waiting[0])
    assert _looks(stalls, [c], 0.0, 10.0) == []
    waiting[0] = False  # (and none came after all: its silence counted from the first look)
    assert [t for t, _, _ in _looks(stalls, [c], 10.5, 10.5)] == [10.5]


def test_a_connection_not_passed_is_forgotten() -> None:
    """Not read meanwhile (its owner stopped reading it: a queue full), its silence
    counts again from the look that sees it read once more."""
    c = Conn()
    c.feed(b"\x10\x00")
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    assert _looks(stalls, [c], 0.0, 3.5) == []
    assert _looks(stalls, [], 4.0, 30.0) == []
    assert _looks(stalls, [c], 30.5, 34.0) == []
    assert [t for t, _, _ in _looks(stalls, [c], 34.5, 34.5)] == [34.5]


def test_a_closed_connection_is_not_said() -> None:
    c = Conn()
    c.feed(b"\x10\x00")
    c.closed = True
    stalls = Stalls(HEARTBEAT, waiting=lambda ch: False)
    assert _looks(stalls, [c], 0.0, 10.0) == []


def test_begun_says_what_is_held_of_the_frame_not_yet_whole() -> None:
    d = FrameDecoder()
    assert d.begun() is None and d.partial() == ""
    d.feed(b"\x10")
    assert d.begun() == (1, 0) and d.partial() == "1 of the 4 bytes of its length"
    d = FrameDecoder()
    frame = _frame(1)
    d.feed(frame + frame[:7])
    assert d.begun() == (7, len(frame)) and d.partial() == f"7 of its {len(frame)} bytes"
    d = FrameDecoder()
    d.feed(struct.pack("<IHHI", 1 << 20, 0, 0, 0) + bytes(200_000))  # (its own memory)
    assert d.receiving_large and d.begun() == (200_012, (1 << 20) + 4)
    d = FrameDecoder()
    d.feed(frame)
    assert d.begun() is None and d.next_frame() is not None and d.empty
