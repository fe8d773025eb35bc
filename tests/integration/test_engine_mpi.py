"""The mpi engine under a real mpiexec, beyond the conformance cases: a wrong rank
count, and ranks bound to every interface registering a host name others can dial.
Each launch runs in a private loopback-only network namespace where the machine
permits one (the wildcard test runs only there: inside it, every interface is
loopback)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from polybus.testing.engines import CASES, check, command, mpi_unavailable

from .conftest import descendants


@pytest.fixture(autouse=True)
def _need_mpi() -> None:
    if why := mpi_unavailable():
        pytest.skip(f"mpi engine: {why}")


def _launch(argv: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # (the group started here, alone)
        proc.communicate()
        raise
    return proc.returncode, out.decode(errors="replace")


def test_too_few_ranks_is_a_clear_error_on_every_rank(tmp_path: Path) -> None:
    before = descendants(os.getpid())
    check("local", CASES[0], tmp_path)  # (writes the program; 2 replicas: 3 ranks)
    argv = command("mpi", tmp_path / "app.toml", 2, tmp_path / "out.json", ranks=2)
    status, out = _launch(argv, tmp_path)
    assert status != 0
    assert out.count("so 3 ranks; it was started on 2 ranks") == 2, out
    assert descendants(os.getpid()) <= before


def test_ranks_on_every_interface_register_their_host_name(tmp_path: Path) -> None:
    from polybus.bench.peers._driver import loopback_only_prefix

    if not loopback_only_prefix():
        pytest.skip("binds every interface: run only in a private loopback-only namespace, "
                    "which this machine does not permit")
    check("local", CASES[0], tmp_path)
    argv = command("mpi", tmp_path / "app.toml", 2, tmp_path / "out.json")
    argv = [a.replace("--quiet", "--no-worker-output") for a in argv]
    argv += ["--set", 'cluster.listen_host="0.0.0.0"']
    status, out = _launch(argv, tmp_path)
    assert status == 0, out
    host = socket.gethostname()
    assert out.count(f"at tcp://{host}:") == 2, out  # each rank's registered address
    assert "0.0.0.0" not in out
