"""Forwarded values sent replica to replica: the sending half of worker/forwarding.py.

A ``Deliver`` goes to the replica at ``to`` over a worker-to-worker connection
authenticated with the cluster token, made on first use and kept; to this replica
itself it goes with no socket. A value it cannot send on (the consumer's replica
unreachable, a value the codec cannot carry) is said to the client whose request it
was (``Undelivered``): only the producer's replica knows. A failure over the frame limit
goes cut to fit (replies.cut_failure); one that cannot go at all is said to no one: the
client has the producer's Fail, and sends it on itself.

A value asked for after its answer (a ``Forward`` that finds it kept) is sent by a
thread of its own (`send_later`), not by the thread that read the request: that one
reads the replica's sockets, and a dial of a peer waits for the peer's greeting, which
the peer sends once its own reading thread accepts. Two replicas each sending a kept
value to the other at once both waited there, reading nothing and answering no Ping:
the client took both for dead (tests/integration/test_forward_crossed.py). Each peer
has a sending thread of its own, in order, while values wait for it (one thread for
all held every value behind a dial that hung, to a peer accepting connections but not
greeting); a dial holds no lock another peer's sends or `close` wait on, and one that
ends once the replica stopped closes what it made, and one that fails fails every value
that waited for it (each dialling again waited out its own handshake timeout behind a
peer that never greets; tests/unit/test_fwd_send_later.py).

What waits for those threads (the value being sent included) is bounded, as the thread
that reads the sockets may not wait for room: at most ``OUTBOX_BOUND`` values for one
peer, ``OUTBOX_TOTAL`` for all, ``OUTBOX_BYTES`` of them (a value sent to several
consumers counted once; the bytes are not asked of a value to a peer with none waiting,
so one larger than the bound still goes), to at most ``SENDERS_BOUND`` peers at once
(one thread each). A value past a bound is not kept: its client is told at once,
``Undelivered`` of type BusyError saying which bound, as a replica's full queue under
``overflow = "reject"`` says; its consumer fails with it, and the replica serves on
(tests/unit/test_fwd_send_later.py).

A ``to`` that is no address is told to the client alone; the last `UNREACHED_BOUND` not
reached are remembered, logged cut short (tests/unit/test_fwd_bad_address.py).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import TYPE_CHECKING, Any

from polybus.errors import MessageTooLarge, PolybusError, TransportError
from polybus.lazynumpy import is_plain_array
from polybus.quieter import doubling
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.transport.keepalive import keep_alive
from polybus.wire.codec import Codec
from polybus.wire.messages import Deliver, Undelivered
from polybus.wire.unsendablepath import at
from polybus.worker import replies
from polybus.worker.cache import DEFAULT_CAPACITY
from polybus.worker.fwdaddress import not_an_address, quoted
from polybus.worker.heldvalue import held_bytes
from polybus.worker.poller import ended

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

log = logging.getLogger("polybus.worker")

__all__ = ["OUTBOX_BOUND", "OUTBOX_BYTES", "OUTBOX_TOTAL", "SENDERS_BOUND", "Peers"]

# What waits for the sending threads (`send_later`), at most. A healthy peer takes its
# values as they come; these are reached behind one that does not (it accepts and never
# greets, 5 s a dial, or it reads nothing and its socket is full).
OUTBOX_BOUND = 10_000           # values waiting for one peer
OUTBOX_TOTAL = 100_000          # values waiting for all peers together
OUTBOX_BYTES = DEFAULT_CAPACITY  # their bytes (the forward store's: 512 MiB), all peers
SENDERS_BOUND = 256             # peers with values waiting (a thread each)
UNREACHED_BOUND = 1024          # addresses remembered as not reached (each said once)
BUSY = "BusyError"              # (what a value past a bound fails its consumer with)

_Waiting = collections.deque[tuple[Deliver, Channel | None]]  # (the first one: being sent)


class Peers:
    """A replica's connections to the others, and the Delivers it sends on them (the
    base of its `Forwarding`, which takes a value sent to this replica itself)."""

    def __init__(self, runtime: WorkerRuntime) -> None:
        self.rt = runtime
        self._connect_lock = threading.Lock()
        self._peers: dict[str, Channel] = {}
        # Peers it could not reach (the last UNREACHED_BOUND), said once each until
        # reached again: a consumer's replica gone took one warning per value to it.
        self._unreached: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.forwarded = 0   # values this replica sent to another stage
        # Delivers for `send_later`'s threads, by peer, in order: a peer's thread starts
        # with its first value and ends when none is left (its outbox then gone). Under
        # ``_connect_lock``, as ``_closed``; a dial holds only its peer's ``_dialing`` lock.
        self._outbox: dict[str, _Waiting] = {}  # (below: each dialled now, its lock and users)
        self._dialing: dict[str, tuple[threading.Lock, list[int]]] = {}
        self._closed = False
        # Their bounds (module constants; tests lower them) and what they count: the
        # values waiting, and the bytes of each distinct one (by id: the deque holds it)
        # with the times it waits, sent or not.
        self.outbox_max, self.outbox_total_max = OUTBOX_BOUND, OUTBOX_TOTAL
        self.outbox_bytes_max, self.senders_max = OUTBOX_BYTES, SENDERS_BOUND
        self._outbox_count = self._outbox_bytes = 0
        self._outbox_values: dict[int, list[int]] = {}  # id(value) -> [times, bytes]
        self.outbox_refused = 0  # values past a bound, ever

    def arrive(self, key: str, ok: bool, value: Any) -> None:
        raise NotImplementedError  # (Forwarding.arrive)

    def _send(self, to: str, msg: Deliver, client: Channel | None = None, *,
              cut: bool = False, asker: Channel | None = None) -> bool:
        """Send ``msg`` to the replica at ``to``; whether it went. One that did not is
        said to ``client`` (``Undelivered``), whose consumer call would otherwise wait
        there for ever. (``cut``: a failure already cut to fit; ``asker``: the client
        whose request it was, when it is not to be told: `_unreachable`.)"""
        if to == str(self.rt.address):  # the next stage is this replica: no socket
            self.forwarded += 1
            # An array of its own, writable, as a Deliver over a socket gives: the one
            # kept in the store is read-only and serves later Fetches and Forwards.
            value = msg.value
            if is_plain_array(value) and not value.flags.writeable:
                value = value.copy()
            self.arrive(msg.key, msg.ok, value)
            return True
        peer: Channel | None = None
        # Counted before it goes: its consumer's replica can answer the client before
        # this thread is back from the send (a count read then missed it); taken back
        # below if it did not go.
        self.forwarded += 1
        try:
            peer = self._peer(to)
            peer.send(msg)
        except MessageTooLarge as exc:
            self.forwarded -= 1
            # Over the frame limit the two replicas agreed: refused before a byte of it
            # was written, so the connection serves on (it was taken for a peer out of
            # reach and dropped). A failure goes cut to fit, as its answer to the client
            # does (replies.fitted): it was refused, and its consumer failed with "the
            # value it returned cannot be sent". A value: the consumer fails as a value
            # too large to answer does (replies.unsendable), saying it was the forwarded one.
            if not msg.ok and not cut and peer is not None:  # (cut once)
                texts = replies.cut_failure(msg.value, replies.failure_room(peer.codec.max_frame))
                return self._send(to, Deliver(msg.key, False, texts), client, cut=True,
                                  asker=asker)
            self._undelivered(to, msg, client, replies.TOO_LARGE,
                              f"the forwarded value cannot be sent on to {to}: {exc}")
            return False
        except (PolybusError, OSError) as exc:
            self.forwarded -= 1
            self._unreachable(to, exc, asker or client)
            self._undelivered(to, msg, client, type(exc).__name__,
                              f"{self.rt.name} could not send the value to {quoted(to)}: {exc}")
            return False
        except (TypeError, ValueError, OverflowError) as exc:  # a value the codec cannot carry
            self.forwarded -= 1
            # Said as the same value answered to the client is (replies.unsendable), so
            # forward = true or false gives one error: an int past 64 bits was an
            # OverflowError forwarded and a TypeError not; and saying where in the value
            # the part it cannot carry sits, as that answer does.
            where = at(msg.value, exc, self.rt.options.allow_pickle, "result") if msg.ok else ""
            self._undelivered(to, msg, client, "TypeError",
                              f"{replies.unsendable_text(exc, where)} (sent on by {self.rt.name})")
            return False
        return True

    def _unreachable(self, to: str, exc: BaseException, *askers: Channel | None) -> None:
        """``to`` could not be reached: its connection (if any) let go, said once (for
        ``askers``' values: the clients whose requests they were). Said at debug level,
        and not as said, when the run is ending (`_ending`): no one can use them."""
        if getattr(exc, "not_an_address", False):
            return
        ending = self._ending(askers)
        with self._connect_lock:
            first = to not in self._unreached and not ending
            if not ending:
                self._unreached[to] = None
                if len(self._unreached) > UNREACHED_BOUND:
                    self._unreached.popitem(last=False)
            gone = self._peers.pop(to, None)
        if ending:
            log.debug("worker %s: cannot forward to %s: %s (%s)", self.rt.name, quoted(to),
                      quoted(str(exc)), ending)
        elif first:
            log.warning("worker %s: cannot forward to %s: %s (said once until it is "
                        "reached again)", self.rt.name, quoted(to), quoted(str(exc)))
        if gone is not None:
            gone.close()

    def _ending(self, askers: tuple[Channel | None, ...]) -> str:
        """Why values that did not go on are of no use now, or "" if one may be: this
        replica stops, or every one of ``askers`` (their clients) has gone. (A run's end
        closes the client's connections, then stops every replica at once: a call ending
        then, its value to go to a replica stopping too, met a closed listener.)"""
        if self._closed or self.rt._stopping:
            return f"{self.rt.name} is stopping"
        if askers and all(a is not None and (a.closed or ended(a)) for a in askers):
            return "the client that asked for it has gone"
        return ""

    def send_later(self, to: str, msg: Deliver, client: Channel | None) -> None:
        """`_send`, by ``to``'s sending thread: for a thread that must not wait on another
        replica (the one reading this replica's sockets; module docstring). To this
        replica itself it is sent at once (no socket). Past a bound (module docstring)
        it is not sent: ``client`` is told at once."""
        if to == str(self.rt.address):
            self._send(to, msg, client)
            return
        value = msg.value
        size = held_bytes(value)  # (walked before the lock: other peers' threads take it)
        with self._connect_lock:
            if self._closed:
                return  # (stopping: its consumer's client is told by the connection's end)
            box = self._outbox.get(to)
            counted = self._outbox_values.get(id(value))
            full = self._full(to, box, 0 if counted is not None else size)
            if full:
                self.outbox_refused += 1
                refused = self.outbox_refused
            else:
                self._outbox_count += 1
                if counted is not None:
                    counted[0] += 1
                else:
                    self._outbox_values[id(value)] = [1, size]
                    self._outbox_bytes += size
                if box is not None:  # (its thread is on it: it takes this one too)
                    box.append((msg, client))
                    return
                box = self._outbox[to] = collections.deque([(msg, client)])
        if full:
            if doubling(refused):
                log.warning("worker %s: %d forwarded values not sent so far, past a bound "
                            "of what waits to be sent on: %s", self.rt.name, refused, full)
            self._undelivered(to, msg, client, BUSY,
                              f"{self.rt.name} did not send the value on to {to}, as {full}")
            return
        threading.Thread(target=self._sending, args=(to, box), daemon=True,
                         name=f"polybus-forward-{self.rt.name}").start()

    def _full(self, to: str, box: _Waiting | None, n: int) -> str:
        """(``_connect_lock`` held) Why a value of ``n`` new bytes to ``to`` may not wait
        (``box``: what waits for ``to``), or "" if it may."""
        if box is None and len(self._outbox) >= self.senders_max:
            return (f"it is sending values on to {len(self._outbox)} replicas at once (at "
                    f"most {self.senders_max})")
        if box is not None and len(box) >= self.outbox_max:
            return (f"{len(box)} values wait to be sent on to that replica (at most "
                    f"{self.outbox_max}): it takes them slower than they are asked for")
        if self._outbox_count >= self.outbox_total_max:
            return (f"{self._outbox_count} values wait to be sent on to other replicas (at "
                    f"most {self.outbox_total_max})")
        if n and box and self._outbox_bytes + n > self.outbox_bytes_max:
            return (f"{self._outbox_bytes} bytes of values wait to be sent on to other "
                    f"replicas, and this one has {n} (at most {self.outbox_bytes_max} "
                    f"bytes)")
        return ""

    def _sending(self, to: str, box: _Waiting) -> None:
        """``to``'s sending thread: ``box``'s Delivers, in order, until none is left or
        the replica stops."""
        while True:
            with self._connect_lock:
                if not box or self._closed:
                    if self._outbox.get(to) is box:
                        del self._outbox[to]
                    return
                msg, client = box[0]  # (it waits, and is counted, until it has gone)
            try:  # (dialled first if need be: a dial that fails fails what waited for it)
                self._peer(to)
            except Exception as exc:  # (a fault of its own too: what waits fails, not left)
                if not isinstance(exc, PolybusError | OSError):
                    log.exception("worker %s: dialling %s failed", self.rt.name, quoted(to))
                self._dial_failed(to, box, (msg, client), exc)
                continue
            try:
                self._send(to, msg, client)
            except Exception as exc:  # (never the end of the thread: later values would wait)
                log.exception("worker %s: sending a forwarded value to %s failed",
                              self.rt.name, to)
                self._undelivered(to, msg, client, type(exc).__name__,
                                  f"{self.rt.name} failed sending the value to {to}: {exc}")
            finally:
                with self._connect_lock:
                    if box and box[0][0] is msg:  # (not cleared by `close` meanwhile)
                        box.popleft()
                        self._uncount(msg)

    def _dial_failed(self, to: str, box: _Waiting, first: tuple[Deliver, Channel | None],
                     exc: BaseException) -> None:
        """A dial of ``to`` for ``first`` failed: every value waiting for it is said to
        its client now, each with that failure (each dialling again, a peer that accepts
        and never greets took the handshake's timeout per value; said as a fault unless
        every one's client has gone, `_ending`); a value asked for later dials again."""
        with self._connect_lock:
            if box and box[0][0] is first[0]:
                failed = list(box)
                box.clear()
                for m, _ in failed:
                    self._uncount(m)
            else:  # (`close` cleared them meanwhile: the one dialled for is said all the same)
                failed = [first]
        self._unreachable(to, exc, *(client for _, client in failed))
        for m, client in failed:
            self._undelivered(to, m, client, type(exc).__name__,
                              f"{self.rt.name} could not send the value to {quoted(to)}: {exc}")

    def _uncount(self, msg: Deliver) -> None:
        """(``_connect_lock`` held) ``msg`` waits no more."""
        self._outbox_count -= 1
        counted = self._outbox_values[id(msg.value)]
        counted[0] -= 1
        if not counted[0]:
            del self._outbox_values[id(msg.value)]
            self._outbox_bytes -= counted[1]

    def _undelivered(self, to: str, msg: Deliver, client: Channel | None, kind: str,
                     text: str) -> None:
        """Say to ``client`` (if any) that ``msg`` did not reach ``to``: ``kind`` and
        ``text`` are what its consumer call fails with."""
        if client is not None:
            self.rt._send_quietly(client, Undelivered(msg.key, to, kind, text))

    def _peer(self, to: str) -> Channel:
        """The connection to ``to``, dialed if there is none, or if the peer has ended the
        one there is (`_ended`): the dial holds ``to``'s lock alone (a peer whose
        greeting does not come holds up no other, nor `close`)."""
        with self._connect_lock:
            ch = self._live(to)
            if ch is not None:
                return ch
            dialing = self._dialing.get(to)
            if dialing is None:
                dialing = self._dialing[to] = (threading.Lock(), [0])
            dialing[1][0] += 1
        try:
            with dialing[0]:
                return self._dial(to)
        finally:
            with self._connect_lock:
                dialing[1][0] -= 1
                if not dialing[1][0] and self._dialing.get(to) is dialing:
                    del self._dialing[to]

    def _dial(self, to: str) -> Channel:
        """(``to``'s dialling lock held) `_peer`'s dial."""
        with self._connect_lock:  # (dialed meanwhile by another thread?)
            ch = self._live(to)
            if ch is not None:
                return ch
            if self._closed:
                raise TransportError(f"{self.rt.name} is stopping")
        if (fault := not_an_address(to)) is not None:
            raise fault
        codec = Codec(allow_pickle=self.rt.options.allow_pickle,
                      max_frame=self.rt.options.max_frame)
        ch = connect(to, self.rt._token, codec)
        # Probed from this side as the peer probes its end (worker/accepting.py): it
        # only writes, so a peer cut off while it is idle was found by nothing until
        # the next value (transport/keepalive.py).
        keep_alive(ch.sock, self.rt.options.heartbeat)
        ch.spin_s = self.rt.options.spin_s
        with self._connect_lock:
            if not self._closed:
                self._peers[to] = ch
                self._unreached.pop(to, None)
                return ch
        ch.close()  # (made as the replica stopped: kept by no one, nothing sent on it)
        raise TransportError(f"{self.rt.name} is stopping")

    def _live(self, to: str) -> Channel | None:
        """(``_connect_lock`` held) The connection to ``to`` kept, unless it is closed or
        its peer ended it (then closed now: a replica started again at that address is
        dialled, rather than sent a value into the old one's connection, lost there: over
        tcp a write after the peer's FIN succeeds, its bytes lost to the reset that
        answers them, with nothing said). A peer only reads this connection, so it ends
        it only as it goes."""
        ch = self._peers.get(to)
        if ch is None:
            return None
        if not ch.closed and not ended(ch):  # (one poll, no wait, per value sent on)
            return ch
        del self._peers[to]
        ch.close()
        return None

    def close(self) -> None:
        """Close the connections to the peers; the values waiting for a sending thread
        go unsent (each thread ends at its next look; one dialing, when its dial ends)."""
        with self._connect_lock:
            self._closed = True
            for box in self._outbox.values():
                for msg, _ in box:
                    self._uncount(msg)
                box.clear()
            peers, self._peers = self._peers, {}
        for ch in peers.values():
            ch.close()

