"""A dial that fails is a TransportError naming the address, and leaves nothing open
(transport/endpoints.py `connect`).

A Unix socket whose connect failed (no one listens at the path) was left to the
collector, a ResourceWarning where it was collected; a host IDNA cannot encode (an empty
label, one of 64 characters) raised a UnicodeError out of `connect`, where a caller
takes a TransportError for a peer it cannot reach.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from polybus.errors import TransportError
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec

TOKEN = b"endpoints-connect-token-0123456789"


@pytest.mark.parametrize("scheme", ["ipc", "shm"])
def test_a_unix_socket_no_one_listens_at_is_an_error_and_closed(
        scheme: str, tmp_path: Path) -> None:
    where = f"{scheme}://{tmp_path}/none.sock"
    with pytest.raises(TransportError, match=r"cannot connect to .*none\.sock"):
        connect(where, TOKEN, Codec())
    gc.collect()  # (a socket left open says so here: a ResourceWarning, an error)


@pytest.mark.parametrize("host", ["a..b", "x" * 64, f"{'x' * 64}.example"])
def test_a_host_that_is_no_name_is_a_transport_error(host: str) -> None:
    with pytest.raises(TransportError, match="its host is not a name"):
        connect(f"tcp://{host}:1", TOKEN, Codec(), timeout=1.0)
