"""The same module files under tcp, ipc and shm give the same results; the local
engine's Unix sockets are private and gone after the run; nothing is left in /dev/shm."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.testing.conformance import memfd_mappings

APP = Path(__file__).resolve().parent / "apps" / "transport" / "app.toml"


def _dev_shm() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def _run(*sets: str) -> dict[str, Any]:
    out = polybus.run(APP, list(sets))
    result: dict[str, Any] = out.result
    return result


@pytest.fixture(scope="module")
def tcp_result() -> dict[str, Any]:
    return _run()


@pytest.mark.parametrize(("sets", "channel"), [
    (("modules.server.transport=ipc",), "Channel"),
    (("modules.server.transport=shm",), "ShmChannel"),
    # per binding: the module stays tcp, these bindings ask for a local transport
    (("modules.client.use.echo.transport=shm", "modules.client.use.scaled.transport=shm",
      "modules.client.use.make.transport=shm"), "ShmChannel"),
    (("modules.server.transport=shm", "modules.client.use.echo.transport=ipc",
      "modules.client.use.scaled.transport=ipc", "modules.client.use.make.transport=ipc"),
     "Channel"),
])
def test_same_results_on_every_transport(tcp_result: dict[str, Any], sets: tuple[str, ...],
                                         channel: str) -> None:
    before = _dev_shm()
    got = _run(*sets)
    assert got["digests"] == tcp_result["digests"]
    socks = got["sockets"]
    assert socks and all(s["path"] for s in socks), f"calls did not go over a Unix socket: {socks}"
    assert {s["channel"] for s in socks} == {channel}
    for s in socks:
        assert s["mode"] == 0o600, oct(s["mode"])
        assert s["dir_mode"] == 0o700, oct(s["dir_mode"])
        assert not os.path.exists(s["path"]), "socket file left after the run"
        assert not os.path.exists(os.path.dirname(s["path"])), "socket directory left"
    assert not {n for n in _dev_shm() - before if "polybus" in n}
    assert memfd_mappings() == 0


def test_tcp_stays_tcp(tcp_result: dict[str, Any]) -> None:
    assert all(not s["path"] for s in tcp_result["sockets"])
