"""Talking to the registry: resolve (clients) and register + heartbeat (workers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from polybus.errors import (
    AuthenticationError,
    ConnectionLostError,
    PolybusError,
    ProtocolError,
    TLSHandshakeError,
    TransportError,
)
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, connect
from polybus.transport.keepalive import keep_alive
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Goodbye,
    Heartbeat,
    Register,
    Registered,
    Replica,
    Replicas,
    Resolve,
)

_Answer = TypeVar("_Answer", Replicas, Registered)


class RegistrationRefused(TransportError):
    """The registry answered a registration, and said no (the name is taken)."""


class RegistryClient:
    """A blocking request/response connection to the registry (thread-safe).

    ``timeout``: the bound of its handshake, and of each request's wait for its answer
    (`_ask`: a registry that accepted the connection and answers nothing fails the
    request, not holds it for ever).
    ``heartbeat``: its tcp connection is probed by the kernel when silent, from this
    side too, as the registry probes its end (transport/keepalive.py): one held open
    and idle (a session's, from its start to its end) to a registry whose host went is
    ended within `idle_bound_s`, not kept for ever. None: not probed (a worker's sends a
    heartbeat every heartbeat, and a wait for its answer past ``timeout`` finds that)."""

    def __init__(self, address: str, token: bytes, timeout: float = 5.0,
                 heartbeat: float | None = None) -> None:
        try:
            Address.parse(address)
        except TransportError as exc:
            raise TransportError(f"registry address: {exc}") from None
        self.address = address
        self._token = token
        self._timeout = timeout
        self._heartbeat = heartbeat
        self._lock = threading.Lock()
        self._ch: Channel | None = None
        self._interrupted = False

    def _channel(self) -> Channel:
        if self._interrupted:
            raise TransportError(f"the request to the registry at {self.address} was "
                                 "interrupted (the client is closing)")
        if self._ch is not None and self._ch.closed:
            # Found ended by a request (the registry closed it: restarted, or it dropped
            # this connection): its socket closed before the next is made, not left open.
            self._ch.close()
            self._ch = None
        if self._ch is None:
            # Said as the registry, with what to do: the bare transport error names an
            # address only, and a token refusal names no one.
            try:
                self._ch = connect(self.address, self._token, Codec(), timeout=self._timeout)
            except AuthenticationError as exc:
                raise AuthenticationError(
                    f"registry at {self.address} {str(exc).removeprefix('server ')} (use "
                    "the registry's token: the file it printed or was given, as "
                    "--token-file FILE (token_file= from Python), or the same "
                    "$POLYBUS_TOKEN)") from None
            except ProtocolError as exc:
                raise ProtocolError(f"registry at {self.address}: {exc} (is that address "
                                    "a `polybus registry`?)") from None
            except TLSHandshakeError as exc:  # (it answers: in another TLS setting)
                raise TLSHandshakeError(f"registry at {self.address}: {exc}") from None
            except TransportError as exc:
                raise TransportError(
                    f"no registry answers at {self.address} ({exc}): is `polybus "
                    "registry` running? It prints the HOST:PORT to pass") from None
            if self._heartbeat is not None:
                keep_alive(self._ch.sock, self._heartbeat)
            if self._interrupted:  # (while it connected: `interrupt` saw no channel)
                self._ch.close()
                self._ch = None
                raise TransportError(f"the request to the registry at {self.address} was "
                                     "interrupted (the client is closing)")
        return self._ch

    def interrupt(self) -> None:
        """From another thread, without waiting for the request under way: it ends (its
        connection is shut down: a wait for the registry's answer raises
        ConnectionLostError), and every later one raises TransportError. A registry that
        accepted the connection and never answers held a blocked request for ever.
        ``close`` still closes the connection (it waits for the request to end)."""
        self._interrupted = True
        ch = self._ch
        if ch is not None:  # (under the channel's end lock: never a descriptor reused by
            ch.cut()        # a new connection once the look's thread closed this one)

    def _goodbye(self, ch: Channel, msg: Goodbye) -> TransportError:
        """The registry closed ``ch`` saying why (a message it refuses): the error to
        raise, ``ch`` closed so that the next call connects again (it was sent on the
        closed connection, and failed)."""
        ch.close()
        self._ch = None
        return TransportError(f"{self.address} (the registry) closed the connection: "
                              f"{msg.reason}")

    def resolve(self, *, module: str = "", interface: str = "") -> list[Replica]:
        return self._resolve(module, interface, False)[0]

    def resolve_turn(self, *, module: str = "", interface: str = "") -> tuple[list[Replica], int]:
        """`resolve`, taking this client's turn of the registry's rotation: the replicas,
        and how many clients took a turn for them before (where to start the calls)."""
        return self._resolve(module, interface, True)

    def _resolve(self, module: str, interface: str, turn: bool) -> tuple[list[Replica], int]:
        with self._lock:
            msg = self._ask(Resolve(module=module, interface=interface, turn=turn),
                            "resolve", Replicas)
            return list(msg.replicas), msg.turn

    def register(self, replica: Replica) -> None:
        with self._lock:
            msg = self._ask(Register(replica), "register", Registered)
            if not msg.ok:
                raise RegistrationRefused(f"registry refused {replica.name}: {msg.reason}")

    def heartbeat(self, name: str) -> bool:
        """False if the registry no longer holds ``name`` for this connection (it dropped
        it: no heartbeat came within its ttl, the process being stopped or starved)."""
        with self._lock:
            return self._ask(Heartbeat(name), "heartbeat", Registered).ok

    def _ask(self, request: Resolve | Register | Heartbeat, what: str,
             answer: type[_Answer]) -> _Answer:
        """Send ``request`` and wait for its ``answer``, ``timeout`` at most (lock held).
        A registry that accepted the connection and never answers (its process stopped
        or hung, or another polybus peer at its address) held its caller for ever: past
        the bound, ConnectionLostError, as for a registry gone, and the connection is
        closed, so that a late answer is not read as the next request's. (`interrupt`
        ends the wait at once: its connection shut down, the read raises.)"""
        ch = self._channel()
        ch.send(request)
        deadline = time.monotonic() + self._timeout
        while True:
            for msg in ch.pending():
                if isinstance(msg, answer):
                    return msg
                if isinstance(msg, Goodbye):
                    raise self._goodbye(ch, msg)
            left = deadline - time.monotonic()
            if left <= 0:
                ch.close()
                self._ch = None
                raise ConnectionLostError(
                    f"the registry at {self.address} accepted the connection and has not "
                    f"answered a {what} in {self._timeout:g} s: is its process stopped "
                    "(Ctrl-Z, SIGSTOP) or hung, or is something other than `polybus "
                    "registry` listening there? (a registry answers at once)")
            if ch.wait_readable(left):  # (a poll: select() takes no descriptor past 1,023)
                ch.fill(wait=False)

    def close(self) -> None:
        with self._lock:
            if self._ch is not None:
                self._ch.close()
                self._ch = None


class Membership:
    """Keeps one replica registered: heartbeats, and registers again after a registry
    restart, or when a heartbeat is answered "not registered" (the registry dropped it
    after missed heartbeats while its connection stayed open).

    ``say`` (a worker's stderr) is told once per change of state, not at every retry:
    the registry lost, a re-registration refused (a wrong token, a name taken), and
    registered again (after a drop, one line that says why). A worker started by hand
    otherwise serves on in silence while the registry logs its refusals."""

    def __init__(self, client: RegistryClient, replica: Replica, interval: float,
                 say: Callable[[str], None] | None = None) -> None:
        self._client = client
        self._replica = replica
        self._interval = interval
        self._say = say
        self._stop = threading.Event()
        self._short_said = False  # (the registry's ttl shorter than the heartbeat: said)
        self._thread = threading.Thread(target=self._loop, name="polybus-heartbeat", daemon=True)

    def start(self) -> None:
        self._client.register(self._replica)
        self._thread.start()

    def _loop(self) -> None:
        state = "registered"
        acked = time.monotonic()  # the last time the registry said it held this replica
        again = False  # (dropped at the last heartbeat too)
        while not self._stop.wait(self._interval):
            try:
                if state == "registered":
                    sent = time.monotonic()
                    if self._client.heartbeat(self._replica.name):
                        acked, again = time.monotonic(), False
                    elif not self._stop.is_set():
                        self._client.register(self._replica)  # (same name, address, interfaces)
                        self._dropped(sent - acked, again)
                        acked, again = time.monotonic(), True
                else:
                    self._client.register(self._replica)
                    self._tell(state, "registered", "")
                    state = "registered"
                    acked, again = time.monotonic(), False
            except (PolybusError, OSError) as exc:
                if self._stop.is_set():  # (ended by stop(): not a registry lost)
                    return
                self._client.close()
                now = self._trouble(exc)
                self._tell(state, now, str(exc))
                state = now
            if state != "registered":  # (a pause stop() ends: SIGTERM is not held up)
                self._stop.wait(min(self._interval, 0.5))

    def _dropped(self, silent: float, again: bool) -> None:
        """Registered again after the registry dropped this replica, ``silent`` s after
        its last heartbeat the registry answered; ``again``: it had been dropped at the
        heartbeat before too. Twice in a row within two heartbeats of the last answered,
        this process was not stopped: the registry's ttl is shorter than the heartbeat,
        and it drops this worker between every two (invisible to look-ups meanwhile),
        which is said once, as such (it was said at every heartbeat, as a process
        stopped or starved)."""
        if silent > 2 * self._interval or not again:
            self._tell("dropped", "registered", "")
        elif not self._short_said:
            self._short_said = True
            if self._say is not None:
                self._say(f"polybus worker {self._replica.name}: the registry at "
                          f"{self._client.address} dropped this worker {silent:.1f} s after "
                          f"its last heartbeat was answered, and this worker heartbeats "
                          f"every {self._interval:g} s: the registry's ttl is shorter than "
                          "that, and it drops this worker between every two heartbeats "
                          "(registered again each time; look-ups miss it meanwhile). Keep "
                          "the registry's ttl a few heartbeats long: start it with --ttl "
                          f"{3 * self._interval:g}s, or this worker with a shorter "
                          "--heartbeat")

    @staticmethod
    def _trouble(exc: BaseException) -> str:
        """The state a failed heartbeat or registration leaves: "token" (the registry
        refused the cluster token), "refused" (it answered, and said no), else "lost"."""
        if isinstance(exc, AuthenticationError):
            return "token"
        if isinstance(exc, ProtocolError | RegistrationRefused):
            return "refused"
        return "lost"

    def _tell(self, was: str, now: str, detail: str) -> None:
        if self._say is None or now == was:
            return
        who = f"polybus worker {self._replica.name}"
        at = self._client.address
        if now == "registered" and was == "dropped":
            self._say(f"{who}: the registry at {at} had dropped this worker (no heartbeat "
                      "reached it within its ttl: was this process stopped or starved?); "
                      "registered again")
        elif now == "registered":
            self._say(f"{who}: registered again with the registry at {at}")
        elif now == "token":
            self._say(f"{who}: the registry at {at} refused this worker's cluster token; "
                      "was it restarted with another token? Restart it with --token-file "
                      "FILE or $POLYBUS_TOKEN set to this worker's token (a registry that "
                      "made its own token deleted it when it stopped), or restart this "
                      "worker with the registry's new token. Serving on, and retrying")
        elif now == "refused":
            self._say(f"{who}: {detail}. Serving on, and retrying")
        else:
            self._say(f"{who}: lost the registry at {at}; serving on, and registering "
                      "again when a registry answers there")

    def stop(self) -> None:
        """Ends the heartbeats, and a request of theirs waiting for the registry's
        answer (`RegistryClient.interrupt`): a worker stopped while its registry answers
        nothing (stopped, hung, its host gone) waited for that request's bound. The
        client takes no request after (its owner closes it next)."""
        self._stop.set()
        self._client.interrupt()
        if self._thread.ident is not None:  # (not started when the first register failed)
            self._thread.join(timeout=2)
