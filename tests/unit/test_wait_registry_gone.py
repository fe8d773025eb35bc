"""`--wait-for-workers` (client/waitfor.py `await_replicas`) waits through a registry
that is not answering yet, or that is restarted under the wait, up to its bound: a
deployment whose client comes up first may come up before its registry too, and a
registry restarted by its supervisor is back on its address in a moment. Only the
bound ends the wait (the last error then raised, saying what it waited for); a wrong
token is no reason to wait, and fails at once. (In-process registries on loopback.)"""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from polybus.client.waitfor import await_replicas
from polybus.errors import AuthenticationError, TransportError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.wire.messages import Replica

TOKEN = b"wait-registry-token-" + b"r" * 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _replica(name: str) -> Replica:
    return Replica(name, "server", "tcp://127.0.0.1:9", ["square"])


def test_a_registry_restarted_under_the_wait_is_waited_for(
        caplog: pytest.LogCaptureFixture) -> None:
    # The run's client holds its connection to the registry for the whole wait: a
    # registry restarted meanwhile (same address, same token) closed it, and the next
    # look failed the run with ConnectionLostError though the registry was back at once
    # and the wait had seconds to go.
    first = RegistryService(TOKEN)
    where = f"{first.address.host}:{first.address.port}"
    client = RegistryClient(where, TOKEN)
    second: RegistryService | None = None
    worker = RegistryClient(where, TOKEN)
    try:
        assert client.resolve(module="server") == []  # (connected, as the wait's first look)
        first.close()
        second = RegistryService(TOKEN, f"tcp://{where}")
        worker.register(_replica("server-0"))
        with caplog.at_level(logging.WARNING, logger="polybus"):
            await_replicas(client, "server", 1, time.monotonic() + 20, 20)
        assert [r.name for r in client.resolve(module="server")] == ["server-0"]
    finally:
        worker.close()
        client.close()
        first.close()
        if second is not None:
            second.close()


def test_a_registry_not_answering_yet_is_waited_for_and_said(
        caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()
    where = f"127.0.0.1:{port}"
    client = RegistryClient(where, TOKEN)
    started: list[RegistryService] = []
    worker = RegistryClient(where, TOKEN)
    seen = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "does not answer" in record.getMessage():
                seen.set()

    handler = Seen()
    logging.getLogger("polybus").addHandler(handler)

    def later() -> None:  # (the registry, and its worker, once the wait has said so)
        if seen.wait(20):
            started.append(RegistryService(TOKEN, f"tcp://{where}"))
            worker.register(_replica("server-0"))

    starter = threading.Thread(target=later)
    starter.start()
    try:
        with caplog.at_level(logging.WARNING, logger="polybus"):
            await_replicas(client, "server", 1, time.monotonic() + 30, 30)
        starter.join(20)
        assert [r.name for r in client.resolve(module="server")] == ["server-0"]
        lines = [r.getMessage() for r in caplog.records if "does not answer" in r.getMessage()]
        assert len(lines) == 1, lines  # (said once, not at every look)
        assert where in lines[0] and "--wait-for-workers" in lines[0], lines[0]
    finally:
        seen.set()
        starter.join(20)
        logging.getLogger("polybus").removeHandler(handler)
        worker.close()
        client.close()
        for r in started:
            r.close()


def test_past_the_bound_the_registry_error_is_raised_saying_how_long() -> None:
    where = f"127.0.0.1:{_free_port()}"
    client = RegistryClient(where, TOKEN)
    try:
        with pytest.raises(TransportError) as info:
            await_replicas(client, "server", 1, time.monotonic() + 0.3, 0.3)
        assert f"no registry answers at {where}" in str(info.value)
        assert "--wait-for-workers" in str(info.value) and "0.3 s" in str(info.value)
    finally:
        client.close()


def test_a_wrong_token_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with RegistryService(TOKEN) as reg:
        client = RegistryClient(f"{reg.address.host}:{reg.address.port}", b"w" * 40)
        asked: list[str] = []
        plain = client.resolve

        def counted(**kw: str) -> list[Replica]:
            asked.append(kw.get("module", ""))
            return plain(**kw)

        monkeypatch.setattr(client, "resolve", counted)
        try:
            with pytest.raises(AuthenticationError):
                await_replicas(client, "server", 1, time.monotonic() + 60, 60)
            assert asked == ["server"]  # (asked once: a refusal is not waited through)
        finally:
            client.close()
