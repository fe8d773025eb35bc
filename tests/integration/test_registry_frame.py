"""A registry's frames are its own 16 MiB, whatever `[cluster] max_frame` says: a run's
own (engines/base.py `run_registry`) and `polybus registry --config F` alike.

Its answers list every replica registered (a `Replicas`, one frame), so their size grows
with the cluster, not with the program's values. Bounded by a ``max_frame`` of 64 KiB
(the least `check` takes, "which holds polybus's own messages"), a registry of 300
replicas of a module of 10 functions could not answer a Resolve (80 KB: the client's
connection was dropped, "message of 79,705 bytes is over the frame limit"), and a
worker of a module of 4,000 functions could not register (70 KB)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.conftest import Procs, start_registry
from polybus.config import load
from polybus.engines.base import run_registry
from polybus.registry.client import RegistryClient
from polybus.registry.service import MAX_FRAME
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica

TOKEN = "registry-frame-token-0123456789abc"
REPLICAS = 300


def _app(tmp_path: Path, max_frame: str) -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text(f'[cluster]\nmax_frame = "{max_frame}"\n\n'
                   '[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


def _serves_a_large_cluster(address: str) -> None:
    """The registry at ``address`` takes the registration of a module of 4,000
    functions and answers a Resolve of 300 replicas (each over 64 KiB, one frame), and
    says its own limit in its handshake."""
    worker = RegistryClient(address, TOKEN.encode())
    client = RegistryClient(address, TOKEN.encode())
    try:
        worker.register(Replica("wide-0", "wide", "tcp://127.0.0.1:9",
                                [f"wide_function_{i:04d}" for i in range(4000)]))
        functions = [f"function_{i:02d}" for i in range(10)]
        for i in range(REPLICAS):  # (as a worker registers: its pid, its addresses)
            at = f"tcp://node-{i:03d}.cluster.example:4{i:04d}"
            worker.register(Replica(f"server-{i}", "server", at, functions, 1.0, 4000 + i,
                                    [at], "0123456789abcdef"))
        got, turn = client.resolve_turn(module="server")
        assert (len(got), turn) == (REPLICAS, 0)
        assert [r.name for r in client.resolve(module="wide")] == ["wide-0"]
    finally:
        worker.close()
        client.close()
    ch = connect(address, TOKEN.encode(), Codec())
    try:
        assert ch.codec.max_frame == MAX_FRAME  # (narrowed to the limit the registry said)
    finally:
        ch.close()


@pytest.fixture
def run_registry_of(tmp_path: Path) -> Iterator[str]:
    reg = run_registry(load(str(_app(tmp_path, "64KiB"))).cluster, TOKEN.encode())
    try:
        yield str(reg.address)
    finally:
        reg.close()


def test_a_runs_own_registry_serves_a_large_cluster_under_a_small_max_frame(
        run_registry_of: str) -> None:
    _serves_a_large_cluster(run_registry_of)


def test_a_registry_by_hand_serves_a_large_cluster_under_a_small_max_frame(
        procs: Procs, tmp_path: Path) -> None:
    addr, _ = start_registry(procs, {"POLYBUS_TOKEN": TOKEN}, "--config",
                             str(_app(tmp_path, "64KiB")))
    _serves_a_large_cluster(addr)
