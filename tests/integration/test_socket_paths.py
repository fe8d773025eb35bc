"""Unix socket paths (ipc and shm) stay within their 107 bytes whatever TMPDIR and the
replicas' names are, and a path too long is said as such."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

import polybus
from polybus.config import load
from polybus.engines.rundir import SOCKET_PATH_MAX, make_run_dir, run_base
from polybus.engines.served import listen_addresses
from polybus.errors import TransportError
from polybus.testing.apps import write_one_call_app
from polybus.transport.endpoints import Address, listen


@pytest.fixture
def long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR (for this process and those it starts) 100 bytes or more long."""
    deep = tmp_path / ("d" * max(8, 100 - len(str(tmp_path))))
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    return deep


def _own_run_dirs() -> set[Path]:
    return set(run_base().glob(f"polybus-{os.getpid()}-*"))


@pytest.mark.parametrize("transport", ["ipc", "shm"])
def test_a_run_with_a_long_tmpdir_keeps_its_sockets_short(
        tmp_path: Path, long_tmpdir: Path, transport: str) -> None:
    """(Its workers could not listen: "AF_UNIX path too long".) The run's directory goes
    where its socket files' paths fit, and is gone after the run."""
    before = _own_run_dirs()
    app = write_one_call_app(tmp_path, server_keys=f'transport = "{transport}"\nreplication = 2',
                             client="from polybus import use\n\nf = use('f')\n\n\n"
                                    "def main():\n    return [f(i) for i in range(6)]\n")
    assert polybus.run(app).result == list(range(6))
    assert run_base() != long_tmpdir
    assert _own_run_dirs() == before


def test_a_run_directory_leaves_room_for_its_socket_files(long_tmpdir: Path) -> None:
    d = make_run_dir()
    try:
        assert d.parent == run_base() != long_tmpdir
        assert len(os.fsencode(d / "99999.ipc")) <= SOCKET_PATH_MAX
    finally:
        for f in d.iterdir():
            f.unlink()
        d.rmdir()


def test_a_short_tmpdir_is_where_run_directories_go(
        short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    assert run_base() == short_tmp


def test_a_replicas_long_name_is_not_in_its_socket_paths(tmp_path: Path) -> None:
    """A replica an engine with a launcher starts (mpi, ray) listens in a run directory
    of its own: its socket file is named by the transport, not by the replica, whose
    name may be 243 bytes."""
    app = load(write_one_call_app(tmp_path, server_keys='transport = "ipc"'))
    where, rundir = listen_addresses(app, "server", "r" * 243, "127.0.0.1", local=True)
    try:
        assert rundir is not None
        (ipc,) = [a for a in where if a.startswith("ipc://")]
        assert len(os.fsencode(ipc.removeprefix("ipc://"))) <= SOCKET_PATH_MAX
    finally:
        if rundir is not None:
            for f in rundir.iterdir():
                f.unlink()
            rundir.rmdir()


def test_listening_on_a_path_too_long_says_so_and_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / ("s" * 120)
    with pytest.raises(TransportError) as info:
        listen(Address("ipc", path=str(path)))
    assert f"cannot listen on ipc://{path}" in str(info.value)
    assert "at most 107" in str(info.value) and "shorter TMPDIR" in str(info.value)
