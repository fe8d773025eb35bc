"""The mpi engine under a real mpiexec, beyond the conformance cases: a wrong rank
count, and ranks bound to every interface registering a host name others can dial.
Each launch runs in a private loopback-only network namespace where the machine
permits one (the wildcard test runs only there: inside it, every interface is
loopback)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from polybus.testing.apps import write_one_call_app
from polybus.testing.engines import CASES, check, command, launch, mpi_unavailable

from .conftest import descendants


@pytest.fixture(autouse=True)
def _need_mpi() -> None:
    if why := mpi_unavailable():
        pytest.skip(f"mpi engine: {why}")


def test_too_few_ranks_is_a_clear_error_on_every_rank(tmp_path: Path) -> None:
    before = descendants(os.getpid())
    check("local", CASES[0], tmp_path)  # (writes the program; 2 replicas: 3 ranks)
    argv = command("mpi", tmp_path / "app.toml", 2, tmp_path / "out.json", ranks=2)
    status, out = launch(argv, tmp_path)
    assert status != 0
    assert out.count("so 3 ranks; it was started on 2 ranks") == 2, out
    assert descendants(os.getpid()) <= before


ADDRESSES_CLIENT = """\
from polybus import use
from polybus.client.stubs import current

f = use("f")


def main():
    f(1)
    return sorted(a for r in current().registry.resolve() for a in r.addresses)
"""


def test_ranks_on_every_interface_register_their_host_name(tmp_path: Path) -> None:
    from polybus.bench.peers._driver import loopback_only_prefix

    if not loopback_only_prefix():
        pytest.skip("binds every interface: run only in a private loopback-only namespace, "
                    "which this machine does not permit")
    app = write_one_call_app(tmp_path, server_keys="replication = 2")
    (tmp_path / "client.py").write_text(ADDRESSES_CLIENT)
    argv = command("mpi", app, 2, tmp_path / "out.json")
    argv += ["--set", 'cluster.listen_host="0.0.0.0"']
    status, out = launch(argv, tmp_path)
    assert status == 0, out
    got = json.loads((tmp_path / "out.json").read_text())["result"]
    host = socket.gethostname()
    assert len(got) == 2 and all(a.startswith(f"tcp://{host}:") for a in got), got
