"""A `RegistryClient` whose connection the registry closed (a registry restarted, or one
that dropped the connection) connects again at its next request, and closes the old
socket first: it was left open (a descriptor, and a ResourceWarning, per reconnection)
by a caller that asks again, as `--wait-for-workers` does through a registry restart."""

from __future__ import annotations

import gc

import pytest

from polybus.errors import ConnectionLostError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService

TOKEN = b"reconnect-token-" + b"c" * 24


def test_a_connection_the_registry_closed_is_closed_before_the_next() -> None:
    first = RegistryService(TOKEN)
    where = f"{first.address.host}:{first.address.port}"
    client = RegistryClient(where, TOKEN)
    second: RegistryService | None = None
    try:
        assert client.resolve() == []
        old = client._ch
        assert old is not None
        first.close()  # (closes its connections)
        second = RegistryService(TOKEN, f"tcp://{where}")
        with pytest.raises(ConnectionLostError):  # (found closed by this request)
            client.resolve()
        assert client.resolve() == []  # connected again
        assert client._ch is not old
        assert old.sock.fileno() == -1, "the old connection's socket was left open"
        del old
        gc.collect()  # (an unclosed socket says so here: a warning is an error)
    finally:
        client.close()
        first.close()
        if second is not None:
            second.close()
