"""The receiving half of an ``shm`` channel's rings (ringchannel.py has the sending half).

A whole plain frame at the head of the peer's ring (no flags, and if it has buffers
under 128 KiB: nearly every call and answer) is decoded where it lies, never copied
into the frame decoder (its buffers are copied out: they outlive their room); anything
else is copied into the decoder, as on any channel. `take_soon` is a replica's wait for
a lone client's next call, spinning on the ring (worker/direct.py).
"""

from __future__ import annotations

import os
import time

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.transport import ring as _ring
from polybus.transport.channel import Channel
from polybus.wire.framing import _BIG, PREFIX, split
from polybus.wire.messages import Message

__all__ = ["RingReader"]

_U64, _FENCE = _ring._U64, _ring._FENCE
_WRITTEN, _READ, _AWAKE = _ring._WRITTEN, _ring._READ, _ring._AWAKE
_yield = getattr(os, "sched_yield", lambda: None)  # (as spinning.py: a peer on this CPU runs)


class RingReader(Channel):
    """A Channel that reads its peer's frames from a ring (``_rx``, set up by ShmChannel)."""

    _rx: _ring.Ring | None
    # A message decoded straight from the ring by a fill (see `_drain_ring`), not yet
    # taken by `next_message`.
    _ready: Message | None

    def _broken(self, exc: OSError | ValueError, *, sending: bool = False) -> ConnectionLostError:
        """The error a failed ring write or read becomes (ValueError: unmapped by close()
        in another thread); the channel is closed from then on."""
        self.closed = True
        if isinstance(exc, ValueError):
            return ConnectionLostError(f"connection to {self.peer} is closed")
        doing = " while sending" if sending else ""
        return ConnectionLostError(f"connection to {self.peer} broke{doing}: {exc}")

    def _drain_ring(self) -> int:
        rx = self._rx
        if rx is None or not rx.available():
            return 0  # (an empty look, the common one while waiting: no view made)
        if self._ready is None and self.decoder.empty:
            # The common small frame is decoded where it lies in the ring: no copy into
            # the decoder, no second look for it there (small buffers are copied out).
            # (Malformed: the decoder's way, which reports it when it is read.)
            before = self.bytes_received
            try:
                self._ready = self._take_plain(rx)
            except ProtocolError:
                pass
            if self._ready is not None:
                return self.bytes_received - before
        total = 0
        while True:
            buf = self.decoder.get_buffer()
            room = buf.nbytes
            n = rx.read_into(buf)
            del buf  # a live view would stop the decoder growing its scratch
            if not n:
                break
            self.decoder.buffer_updated(n)
            total += n
            if n < room:
                break  # took all there was (more that came meanwhile: the next fill)
        self.bytes_received += total
        return total

    def _take_plain(self, rx: _ring.Ring) -> Message | None:
        """The message at the head of the ring, decoded in place, if a whole plain frame
        (no flags, small buffers if any: nearly every call and answer) lies there in
        one piece: read where it lies, then its room freed (``read`` advanced), with no
        call into the ring (this runs once per message)."""
        try:
            read = rx.read
            pos = read & rx._mask
            # (The count first: the prefix is read only once all of it is written; a
            # writer short of room publishes a frame in pieces.)
            if pos > rx.capacity - 12 or (ahead := _U64.unpack_from(rx.map, _WRITTEN)[0] - read) < 12:
                return None
            length, nbufs, flags, header_len = PREFIX.unpack_from(rx.data, pos)
            if (flags or length > self.codec.max_frame or pos + 4 + length > rx.capacity
                    or ahead < 4 + length
                    or (length != 8 + header_len if not nbufs else length >= _BIG or length < 8)):
                return None
            body = rx.data[pos + (4 if nbufs else 12):pos + 4 + length]
        except ValueError as exc:  # the ring was unmapped by close() in another thread
            raise self._broken(exc) from None
        try:  # (ProtocolError: malformed)
            msg = self._decode_body(body, nbufs) if nbufs else self.codec.decode_header(body)
        finally:
            del body
        rx.read = read = read + 4 + length
        _U64.pack_into(rx.map, _READ, read)  # the writer may reuse the room only now
        self.bytes_received += 4 + length
        return msg

    def _decode_body(self, body: memoryview, nbufs: int) -> Message:
        """The message of a whole frame lying in the ring (``body``: after its length
        field); buffers are copied out, as they must outlive the frame's room (a frame
        with buffers is under 128 KiB here: a larger one goes the decoder's way, into
        memory of its own). ProtocolError for anything malformed."""
        if not nbufs:
            return self.codec.decode_header(body[8:])  # (copies what it keeps)
        return self.codec.decode(split(body, copy=True))

    def next_message(self) -> Message | None:
        msg = self._ready
        if msg is not None:
            self._ready = None
            return msg
        if self.decoder.empty:
            rx = self._rx
            # (Anything else in the ring, a frame in pieces or with buffers: the next
            # fill copies it into the decoder.)
            return None if rx is None else self._take_plain(rx)
        return super().next_message()

    def take_soon(self, seconds: float) -> Message | None:
        """The next message, if one is here or comes within ``seconds`` (spinning on
        the ring, never sleeping): `next_message` and `fill_soon(seconds, stay=True)`
        in one call, for a replica waiting for a lone client's next call
        (worker/direct.py). The awake flag is left up if a frame came (the caller has
        the poller lower it before it sleeps); None if none did (the flag lowered, a
        fence and a last look; with no ``seconds``, nothing is here) or if what came is
        not a whole message yet."""
        msg = self._ready
        if msg is not None:
            self._ready = None
            return msg
        rx = self._rx
        if rx is None or not self.decoder.empty:
            msg = self.next_message()
            if msg is None and self.fill_soon(seconds, True):
                msg = self.next_message()
            return msg
        try:
            rmap = rx.map
            unpack = _U64.unpack_from
            read = rx.read
            if unpack(rmap, _WRITTEN)[0] == read:
                if not seconds:
                    return None
                rx.view[_AWAKE] = 1  # the writer rings no doorbell meanwhile
                clock = time.perf_counter
                deadline = clock() + seconds
                while unpack(rmap, _WRITTEN)[0] == read:
                    if clock() >= deadline:
                        rx.view[_AWAKE] = 0
                        _FENCE.acquire()  # flag down, then look once more (ring.py)
                        _FENCE.release()
                        if unpack(rmap, _WRITTEN)[0] == read:
                            return None
                        break
                    _yield()
            msg = self._take_plain(rx)  # (a whole plain frame at the head)
            if msg is not None:
                return msg
            self._drain_ring()  # buffers, or in pieces: the decoder's way
        except ValueError as exc:  # unmapped by close() in another thread
            raise self._broken(exc) from None
        return self.next_message()

    def wait_readable(self, seconds: float) -> bool:
        """`Channel.wait_readable`: frames in the ring are there to read at once; else
        this side's flag is lowered (the writer then rings its doorbell for the next
        frame, ring.py) and it sleeps on the socket, where bells and descriptors come."""
        rx = self._rx
        if rx is not None:
            self.stay_awake(False)
            _ring.fence()  # (flag down, then the last look: ring.py)
            if self.ring_ready():
                return True
        return super().wait_readable(seconds)

    def stay_awake(self, on: bool) -> None:
        """Say whether this side will look at its ring before it next sleeps: while it
        will, the peer rings no doorbell (a system call, with a wake-up of a process
        that was running anyway). A reader that clears it fences and looks once more
        before sleeping (see `spin`)."""
        rx = self._rx
        if rx is not None and not self.closed:
            try:
                rx.set_awake(on)
            except ValueError:  # unmapped by close() in another thread
                pass

    def buffered(self) -> bool:
        # Frames left in the ring count: those written while this side's flag was up
        # rang no doorbell, so no selector reports them either.
        rx = self._rx  # (ring_ready's look, written out: once per call on a replica)
        try:
            return (not self.decoder.empty or self._ready is not None
                    or (rx is not None and _U64.unpack_from(rx.map, _WRITTEN)[0] != rx.read))
        except ValueError:  # unmapped by close() (in another thread): nothing comes from it
            return False

    def ring_ready(self) -> bool:
        """Frames wait in the ring (no system call)."""
        try:
            return self._ready is not None or (self._rx is not None and self._rx.available() > 0)
        except ValueError:  # unmapped by close() (in another thread): nothing comes from it
            return self._ready is not None
