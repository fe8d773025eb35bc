"""Talking to the registry: resolve (clients) and register + heartbeat (workers)."""

from __future__ import annotations

import threading
import time

from polybus.errors import AuthenticationError, PolybusError, ProtocolError, TransportError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, connect
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


class RegistryClient:
    """A blocking request/response connection to the registry (thread-safe)."""

    def __init__(self, address: str, token: bytes, timeout: float = 5.0) -> None:
        try:
            Address.parse(address)
        except TransportError as exc:
            raise TransportError(f"registry address: {exc}") from None
        self.address = address
        self._token = token
        self._timeout = timeout
        self._lock = threading.Lock()
        self._ch: Channel | None = None

    def _channel(self) -> Channel:
        if self._ch is None or self._ch.closed:
            # Said as the registry, with what to do: the bare transport error names an
            # address only, and a token refusal names no one.
            try:
                self._ch = connect(self.address, self._token, Codec(), timeout=self._timeout)
            except AuthenticationError as exc:
                raise AuthenticationError(
                    f"registry at {self.address} {str(exc).removeprefix('server ')} (use "
                    "the registry's token: --token-file with the file it printed or was "
                    "given, or the same $POLYBUS_TOKEN)") from None
            except ProtocolError as exc:
                raise ProtocolError(f"registry at {self.address}: {exc} (is that address "
                                    "a `polybus registry`?)") from None
            except TransportError as exc:
                raise TransportError(
                    f"no registry answers at {self.address} ({exc}): is `polybus "
                    "registry` running? It prints the HOST:PORT to pass") from None
        return self._ch

    def resolve(self, *, module: str = "", interface: str = "") -> list[Replica]:
        with self._lock:
            ch = self._channel()
            ch.send(Resolve(module=module, interface=interface))
            while True:
                for msg in ch.receive():
                    if isinstance(msg, Replicas):
                        return list(msg.replicas)
                    if isinstance(msg, Goodbye):
                        raise TransportError(f"registry closed the connection: {msg.reason}")

    def register(self, replica: Replica) -> None:
        with self._lock:
            ch = self._channel()
            ch.send(Register(replica))
            while True:
                for msg in ch.receive():
                    if isinstance(msg, Registered):
                        if not msg.ok:
                            raise TransportError(f"registry refused {replica.name}: {msg.reason}")
                        return
                    if isinstance(msg, Goodbye):
                        raise TransportError(f"registry closed the connection: {msg.reason}")

    def heartbeat(self, name: str) -> None:
        with self._lock:
            self._channel().send(Heartbeat(name))

    def close(self) -> None:
        with self._lock:
            if self._ch is not None:
                self._ch.close()
                self._ch = None


class Membership:
    """Keeps one replica registered: heartbeats, and re-registers after a registry restart."""

    def __init__(self, client: RegistryClient, replica: Replica, interval: float) -> None:
        self._client = client
        self._replica = replica
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="polybus-heartbeat", daemon=True)

    def start(self) -> None:
        self._client.register(self._replica)
        self._thread.start()

    def _loop(self) -> None:
        registered = True
        while not self._stop.wait(self._interval):
            try:
                if registered:
                    self._client.heartbeat(self._replica.name)
                else:
                    self._client.register(self._replica)
                    registered = True
            except PolybusError:
                registered = False
                self._client.close()
            except OSError:
                registered = False
                self._client.close()
            if not registered:
                time.sleep(min(self._interval, 0.5))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # (not started when the first register failed)
            self._thread.join(timeout=2)
