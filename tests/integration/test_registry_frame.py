"""`[cluster] max_frame` at the registry: a run's own (engines/base.py `run_registry`)
and `polybus registry --config F` bound their frames by it, up to the registry's own
16 MiB. Both took 16 MiB whatever the configuration said: a configuration lowering
``max_frame`` for peers it trusts less (docs/security.md, "Known limits") left its
registry taking frames 256 times larger."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.conftest import Procs, start_registry
from polybus.config import load
from polybus.engines.base import run_registry
from polybus.registry.service import MAX_FRAME, frame_limit
from polybus.testing.peers import next_message
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Goodbye, Replicas, Resolve

TOKEN = "registry-frame-token-0123456789abc"
LIMIT = 64 * 1024


def _app(tmp_path: Path, max_frame: str) -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text(f'[cluster]\nmax_frame = "{max_frame}"\n\n'
                   '[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


def _bounded_at(address: str, limit: int) -> None:
    """The registry at ``address`` said ``limit`` in its handshake, answers a frame
    within it, and drops a peer whose frame is over it, saying so."""
    ch = connect(address, TOKEN.encode(), Codec())
    try:
        assert ch.codec.max_frame == limit  # (narrowed to the limit the registry said)
        ch.send(Resolve(module="server", req=1))
        assert next_message(ch) == Replicas([], 1)
        # A Resolve whose module is ``limit`` bytes: a frame just over the limit.
        header = b"\x94\x17\xdb" + struct.pack(">I", limit) + b"m" * limit + b"\xa0\x02"
        with ch.send_lock:  # (past this side's own check, as a peer that ignores it)
            ch._send_pieces([struct.pack("<IHHI", 8 + len(header), 0, 0, len(header)),
                             header], None)
        got = next_message(ch)
        assert isinstance(got, Goodbye) and f"over the limit of {limit} bytes" in got.reason, got
    finally:
        ch.close()


@pytest.fixture
def run_registry_of(tmp_path: Path) -> Iterator[str]:
    reg = run_registry(load(str(_app(tmp_path, "64KiB"))).cluster, TOKEN.encode())
    try:
        yield str(reg.address)
    finally:
        reg.close()


def test_a_runs_own_registry_takes_the_configured_max_frame(run_registry_of: str) -> None:
    _bounded_at(run_registry_of, LIMIT)


def test_a_registry_by_hand_takes_the_configured_max_frame(procs: Procs, tmp_path: Path) -> None:
    addr, _ = start_registry(procs, {"POLYBUS_TOKEN": TOKEN}, "--config",
                             str(_app(tmp_path, "64KiB")))
    _bounded_at(addr, LIMIT)


def test_the_registry_takes_no_more_than_its_own_limit() -> None:
    """The default ``max_frame`` (1 GiB) is for the program's values: a registry's
    messages are names and addresses, and it keeps to 16 MiB."""
    assert frame_limit(1 << 30) == MAX_FRAME == 16 * 1024 * 1024
    assert frame_limit(LIMIT) == LIMIT
