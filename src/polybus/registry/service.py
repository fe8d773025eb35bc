"""The registry as a service: one thread accepts, one thread a connection.

Traffic to the registry is light (a registration, a heartbeat a second, a look-up per
client), so threads keep this simple; the state it guards is `RegistryState`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from functools import partial

from polybus.errors import PolybusError
from polybus.quieter import Quieter
from polybus.registry.limits import replica_fault, resolve_fault, said
from polybus.registry.state import RegistryState
from polybus.transport.channel import Channel
from polybus.transport.endpoints import (
    HANDSHAKE_TIMEOUT,
    Address,
    HandshakeGate,
    PeerWentAway,
    authenticate,
    listen,
)
from polybus.transport.greeting import Greeting, crowded
from polybus.transport.keepalive import keep_alive
from polybus.transport.stalls import Stalls
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Goodbye,
    Heartbeat,
    Message,
    Register,
    Registered,
    Replica,
    Replicas,
    Resolve,
    Unregister,
)
from polybus.wire.undecodable import sent_as

log = logging.getLogger("polybus.registry")

# A registry's frame limit, whatever ``[cluster] max_frame`` says (that is for the
# program's values). Its answers list every replica registered, a few hundred bytes each
# (more for a module of many functions), in one frame: bounded by a ``max_frame`` of
# 64 KiB, a registry of 300 replicas could not answer a Resolve, nor take a module of
# 4,000 functions (tests/integration/test_registry_frame.py).
MAX_FRAME = 16 * 1024 * 1024
# The registry's looks (silent replicas dropped, stalled frames cut) come every half
# heartbeat, at most every 0.5 s and at least this apart: a --ttl of a microsecond is a
# duration > 0, and its looks spun a CPU.
LOOK_MIN_S = 0.01


class RegistryService:
    """Serves `RegistryState` on an address until `close()`."""

    def __init__(self, token: bytes, address: str = "tcp://127.0.0.1:0", ttl: float = 3.0,
                 max_frame: int = MAX_FRAME,
                 say: Callable[[str], None] | None = None,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        self._token = token
        self._max_frame = max_frame
        self._handshake_timeout = handshake_timeout  # (the whole of it, TLS's too)
        # ``say``: told, a line each, of every registration, and of every replica that
        # goes (its connection closed) or is dropped (silent past the ttl): `polybus
        # registry` prints them, so whoever runs it sees its members come and go.
        self._say = say
        # Told of each replica registered, on the thread of its connection, with the
        # registry's lock held: it must not block (the local engine's, for serve's
        # front door to look for its lost replicas: http/revival.py `registered`).
        self.on_register: Callable[[Replica], None] | None = None
        self.state = RegistryState(ttl=ttl, on_drop=None if say is None else self._dropped)
        self._lock = threading.Lock()
        self._listener, self.address = listen(Address.parse(address))
        self._channels: set[Channel] = set()
        self._greeting = Greeting("polybus-registry-conn")  # for close() to end
        self._gate = HandshakeGate()  # handshakes under way (connected peers not counted)
        self._quiet = Quieter()  # refusals logged once a minute per kind (quieter.py)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="polybus-registry",
                                        daemon=True)
        self._thread.start()
        self._looks = threading.Thread(target=self._look_loop, name="polybus-registry-looks",
                                       daemon=True)
        self._looks.start()

    def _look_loop(self) -> None:
        """Every half heartbeat (ttl / 6, at most 0.5 s, at least LOOK_MIN_S): with ``say``, replicas silent
        past the ttl dropped (a drop is otherwise found at a look that needs one); and a
        connection whose frame begun has had no byte for 4 heartbeats is cut
        (transport/stalls.py): its thread, blocked reading it, finds it ended and goes
        as for a peer that closed. Only connections whose decoder is not empty are
        looked at further: nothing is timed per frame."""
        heartbeat = self.state.ttl / 3  # (as its connections are probed: `_accept_loop`)
        stalls = Stalls(heartbeat)
        while not self._closed.wait(max(LOOK_MIN_S, min(0.5, heartbeat / 2))):
            now = time.monotonic()
            with self._lock:
                if self._say is not None:
                    self.state.expire(now)
                begun = [ch for ch in self._channels if not ch.decoder.empty]
            for ch, what in stalls.look(begun, now):
                log.warning("registry: %s %s (ttl %g s: heartbeat %g s): dropped", ch.peer,
                            what, self.state.ttl, heartbeat)
                ch.stalled = True
                ch.cut()

    def _dropped(self, r: Replica, silent: float) -> None:
        if self._say is not None and not self._closed.is_set():
            self._say(f"registry: dropped {r.name} (module {r.module!r}, {r.address}): "
                      f"no heartbeat for {silent:.1f} s (ttl {self.state.ttl:g} s)")

    def __enter__(self) -> RegistryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            # A peer cut off by the network is found by the kernel's probes, and its
            # thread ends (transport/keepalive.py): the ttl is three heartbeats.
            keep_alive(sock, self.state.ttl / 3)
            # The handshake runs in the connection's own thread: run here, a peer that
            # connected and said nothing held every later one up for the handshake's
            # timeout (three such peers and a worker's registration timed out). So many
            # at once, and a new connection is closed at once (a thread each, unbounded).
            refused = self._gate.enter(self._greeting.cut_oldest)
            if refused:
                sock.close()
                if refused == 1:  # (said once while the gate stays full)
                    log.warning("registry: %d handshakes are under way, the most at once, "
                                "and as many cut short have not ended yet; new connections "
                                "are closed until one ends", self._gate.limit)
                continue
            # (Not started once close() began, or with no descriptor or thread to spare.)
            if not self._greeting.start(sock, partial(self._serve, sock, peer)):
                sock.close()
                self._gate.leave()
                if self._closed.is_set():
                    return

    def _serve(self, sock: socket.socket, peer: object, waker: socket.socket) -> None:
        try:
            ch = authenticate(sock, peer, self._token, Codec(max_frame=self._max_frame),
                              self._handshake_timeout)
        except PolybusError as exc:
            if (not self._closed.is_set() and not self._greeting.was_cut(waker)
                    and (said := self._quiet.let(str(exc)))):  # (else close() ended it)
                did = "" if isinstance(exc, PeerWentAway) else " refused a connection"
                log.warning("registry%s: %s", did, said)
            return
        finally:
            self._greeting.done(waker)
            refused, cut = self._gate.leave()
            # (The first refused was said when it came; close() ends every handshake
            # under way, and what the gate did before is no news then.)
            if (refused > 1 or cut) and not self._closed.is_set():
                log.warning("%s", crowded("registry", refused, cut, self._gate.limit,
                                          self.address))
        with self._lock:
            if self._closed.is_set():
                ch.close()
                return
            self._channels.add(ch)
        owner = id(ch)
        try:
            while not self._closed.is_set():
                for msg in ch.receive():
                    if isinstance(msg, Goodbye):  # the peer is leaving: no answer
                        return
                    reply = self._handle(msg, owner)
                    if reply is not None:
                        ch.send(reply)
                    if isinstance(reply, Goodbye):  # a message it does not take: closed
                        log.warning("registry dropped %s: %s", ch.peer, reply.reason)
                        return
        except PolybusError as exc:
            if not ch.closed:  # bad input (a ProtocolError), or an answer it cannot send
                log.warning("registry dropped %s: %s", ch.peer, exc)
                try:
                    ch.send(Goodbye(str(exc)))
                except PolybusError:
                    pass
            elif (not self._closed.is_set() and not ch.stalled  # (else said: `_look_loop`)
                  and (lost := ch.decoder.partial())):
                log.warning("registry: %s went in the middle of a frame (%s received; "
                            "dropped): %s", ch.peer, lost, exc)
        except Exception:  # a fault in polybus's steps: this connection alone goes
            log.exception("registry: serving %s failed; its connection is dropped", ch.peer)
        finally:
            with self._lock:
                went = self.state.owned(owner)
                self.state.drop_owner(owner)
                self._channels.discard(ch)
            if self._say is not None and not self._closed.is_set():
                for r in went:
                    self._say(f"registry: {r.name} (module {r.module!r}, {r.address}) "
                              f"went: its connection closed")
            ch.close()

    def _handle(self, msg: Message, owner: int) -> Message | None:
        now = time.monotonic()
        with self._lock:
            match msg:
                case Register(replica=r):
                    # (Its text checked first: a name of a megabyte, or with a newline
                    # that forged a line of this log, was stored and said as it came.)
                    why = replica_fault(r) or self.state.register(r, owner, now)
                    if self._say is not None and why is None:
                        self._say(f"registry: {r.name} registered (module {r.module!r}, "
                                  f"{r.address})")
                    elif self._say is not None and (line := self._quiet.let(
                            f"registry: refused {said(r.name)} at {said(r.address)}: {why}")):
                        self._say(line)  # (it retries every few seconds: quietened)
                    if why is None and (told := self.on_register) is not None:
                        told(r)
                    return Registered(why is None, why or "")
                case Heartbeat(name=n):
                    # Answered, so that a worker dropped while its connection stayed open
                    # (stopped or starved past the ttl) learns it and registers again.
                    if self.state.heartbeat(n, owner, now):
                        return Registered(True)
                    return Registered(False, f"{said(n)} is not registered on this "
                                             f"connection (no heartbeat within "
                                             f"{self.state.ttl:g} s?)")
                case Resolve(module=m, interface=i, req=req, turn=turn):
                    if (why := resolve_fault(msg)) is not None:
                        return Goodbye(f"the registry refused a Resolve: {why}")
                    found = self.state.resolve(module=m, interface=i, now=now)
                    return Replicas(found, req, self.state.take_turn(module=m, interface=i)
                                    if turn else 0)
                case Unregister(name=n):
                    self.state.unregister(n, owner)
                    return None
                case _:
                    # (by the name it was sent as: an undecodable Call is refused here
                    # as one, not as this side's own class for it, wire/undecodable.py)
                    return Goodbye(f"the registry does not take {sent_as(msg)} messages")

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            for ch in list(self._channels):
                ch.close()
        self._greeting.end(timeout=0.0)  # handshakes under way end (their threads close)
        self._thread.join(timeout=2)
        self._looks.join(timeout=2)  # (woken by `_closed`)
        for line in self._quiet.rest():  # (last: a refusal under way is counted first)
            log.warning("registry refused connections: %s", line)
