"""A replica's new connections: accepted under the handshake gate, authenticated apart
from the poller (transport/greeting.py), and handed to the poller to adopt; and, looked
at from time to time, its TCP clients cut off by the network (transport/keepalive.py)
and its peers stalled in the middle of a frame (transport/stalls.py) found and dropped.

A mixin of `Intake` (intake.py), whose runtime owns the state declared here.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from functools import partial

from polybus.errors import PolybusError
from polybus.quieter import Quieter
from polybus.transport.channel import Channel
from polybus.transport.endpoints import (
    Address,
    HandshakeGate,
    Listener,
    PeerWentAway,
    authenticate,
)
from polybus.transport.greeting import Greeting, crowded
from polybus.transport.keepalive import bound_s, keep_alive, probe_s, unheard_s
from polybus.transport.stalls import Stalls
from polybus.wire.codec import Codec
from polybus.worker.options import ServeOptions

log = logging.getLogger("polybus.worker")


class Accepting:
    """Accepts and authenticates connections; the state is the runtime's."""

    name: str
    options: ServeOptions
    _lock: threading.Lock
    _quiet: Quieter
    _token: bytes
    _listening: dict[Address, Listener]
    _gates: dict[Address, HandshakeGate]
    _greeting: Greeting
    _new: list[Channel]
    _channels: set[Channel]
    _stopping: bool
    _paused: dict[Channel, None]  # not read: the queue is full (intake.py)
    _stuck: set[Channel]  # not read: answers wait for them to read (unread.py)
    _next_unheard_look = 0.0  # when `_look_for_cut_off` looks next
    _next_stall_look = 0.0  # when `_look_for_stalled` looks next
    _stalls: Stalls | None = None  # (made at the first look)

    def _wake(self) -> None:
        raise NotImplementedError  # the runtime's

    def _accept(self, where: Address) -> None:
        try:
            sock, peer = self._listening[where].accept()
        except OSError:
            return
        # The kernel probes it once silent, and ends it if it goes unanswered: a client
        # cut off, not one idle or waiting for a long call (its kernel answers).
        keep_alive(sock, self.options.heartbeat)
        gate = self._gates[where]
        refused = gate.enter(self._greeting.cut_oldest)
        if refused:  # (said once while the gate stays full, not per connection)
            sock.close()
            if refused == 1:
                log.warning("worker %s: %d handshakes are under way on %s, the most at "
                            "once, and as many cut short have not ended yet; new "
                            "connections are closed until one ends", self.name, gate.limit,
                            where)
            return
        # The handshake runs apart from the poller, so a slow or hostile peer stalls no
        # one; stop() ends it (transport/greeting.py). Not started (stopping, or no descriptor or
        # thread to spare): closed, as if the gate were full.
        if not self._greeting.start(sock, partial(self._handshake, sock, peer, where, gate)):
            sock.close()
            gate.leave()

    def _handshake(self, sock: socket.socket, peer: object, where: Address,
                   gate: HandshakeGate, waker: socket.socket) -> None:
        try:
            ch = authenticate(sock, peer, self._token,
                              Codec(allow_pickle=self.options.allow_pickle,
                                    max_frame=self.options.max_frame),
                              self.options.handshake_timeout, shm=where.scheme == "shm")
        except PolybusError as exc:
            if (not self._stopping and not self._greeting.was_cut(waker)  # (else said)
                    and (said := self._quiet.let(str(exc)))):  # (else stop())
                did = "" if isinstance(exc, PeerWentAway) else " refused a connection"
                log.warning("worker %s%s: %s", self.name, did, said)
            return
        except OSError as exc:
            if not self._stopping and not self._greeting.was_cut(waker):
                log.warning("worker %s dropped a connection during the handshake: %s",
                            self.name, exc)
            return
        finally:
            self._greeting.done(waker)
            refused, cut = gate.leave()
            # (the first refused was said when it came; not at a stop, which ends them all)
            if (refused > 1 or cut) and not self._stopping:
                log.warning("%s", crowded(f"worker {self.name}", refused, cut, gate.limit,
                                          where))
        ch.spin_s = self.options.spin_s
        with self._lock:
            if self._stopping:  # too late: stop() has closed the others already
                ch.close()
                return
            self._new.append(ch)
        self._wake()

    def _look_at_connections(self) -> None:
        """From the standby thread, every few milliseconds (up to 100 ms when idle):
        the two looks below, each when it falls due."""
        now = time.monotonic()
        if now >= self._next_stall_look:
            self._next_stall_look = now + self.options.heartbeat / 2
            self._look_for_stalled(now)
        if now >= self._next_unheard_look:
            self._look_for_cut_off(now)

    def _look_for_stalled(self, now: float) -> None:
        """Every half heartbeat: a client whose frame begun has had no byte for 4
        heartbeats (transport/stalls.py) is cut, and dropped as a client that closed
        (its calls not yet run go) by whoever watches it, as `_look_for_cut_off` does.
        Only connections read now count (not one the replica stopped reading: its queue
        full, or its answers unread), and of those only the few whose decoder is not
        empty are looked at further: nothing is timed per frame."""
        try:
            begun = [ch for ch in self._channels if not ch.decoder.empty]
        except RuntimeError:  # (changed as it was looked at: looked at next time)
            return
        stalls = self._stalls
        if stalls is None:
            stalls = self._stalls = Stalls(self.options.heartbeat)
        reading = [ch for ch in begun
                   if ch not in self._paused and ch not in self._stuck and not ch.unsent]
        for ch, what in stalls.look(reading, now):
            log.warning("worker %s: %s %s (heartbeat %g s): dropped, with its calls not "
                        "yet run", self.name, ch.peer, what, self.options.heartbeat)
            ch.stalled = True
            ch.cut()

    def _look_for_cut_off(self, now: float) -> None:
        """Every half probe interval (`probe_s`, whole seconds of heartbeat: the bound is
        no finer): a TCP client that has acknowledged nothing written to it for
        `bound_s` (transport/keepalive.py) is cut off. Its connection is shut down here,
        and whoever watches it (the poller, or the writer of its unread answers) finds it
        ended and drops it as a client that closed: its queued calls are not run for
        nobody. A client cut off while nothing is written to it is the kernel's probes'
        to end (`_accept`), found the same way."""
        self._next_unheard_look = now + probe_s(self.options.heartbeat) / 2  # (whole s)
        try:
            channels = list(self._channels)
        except RuntimeError:  # (changed as it was copied: looked at next time)
            return
        bound = bound_s(self.options.heartbeat)
        for ch in channels:
            if ch.closed or (unheard := unheard_s(ch.sock)) < bound:
                continue
            log.warning("worker %s: %s has acknowledged nothing written to it for %.1f s "
                        "(heartbeat %g s: cut off after %d s): taken for cut off by the "
                        "network; its connection and its calls not yet run are dropped",
                        self.name, ch.peer, unheard, self.options.heartbeat, bound)
            ch.cut()
