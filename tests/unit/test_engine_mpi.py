"""The mpi engine's pure parts: which rank serves which replica, the rank count every
rank checks alike, and what a configuration may not ask of it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import polybus
from polybus.config import load, validate
from polybus.engines import launchenv, mpi
from polybus.engines.mpi import _check_size, replica_of
from polybus.engines.served import replicas_in_order
from polybus.errors import ConfigError, ConfigWarning
from polybus.runner import serving_rank
from polybus.stopsignals import StopSignals
from polybus.testing.apps import write_app

TWO_SERVERS = """\
    [modules.a]
    source = "server.py"
    replication = 2
    [modules.b]
    source = "server.py"
    replication = 3
    [modules.client]
    source = "client.py"
    entrypoint = "main"
    [bind]
    "client.f" = "b.f"
    "client.g" = "a.f"
    [cluster]
    engine = "mpi"
"""


CLIENT = "from polybus import use\n\nf = use('f')\ng = use('g')\n\n\ndef main():\n    return f(1)\n"


def _app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server="def f(x):\n    return x\n",
                     client=CLIENT, toml=TWO_SERVERS)


def test_ranks_serve_the_replicas_in_the_files_order(tmp_path: Path) -> None:
    app = load(_app(tmp_path))
    names = [r.name for _, r in replicas_in_order(app)]
    assert names == ["a-0", "a-1", "b-0", "b-1", "b-2"]
    module, replica = replica_of(app, 3)  # rank 0 is the client's
    assert (module.key, replica.name) == ("b", "b-0")


@pytest.mark.parametrize("size", [1, 5, 7])
def test_a_wrong_rank_count_names_the_right_one(tmp_path: Path, size: int) -> None:
    app = load(_app(tmp_path))
    _check_size(app, 6)  # 1 client + 5 replicas: no error
    with pytest.raises(ConfigError) as info:
        _check_size(app, size)
    assert info.value.key == "cluster.engine"
    assert "so 6 ranks" in str(info.value) and "mpiexec -n 6" in str(info.value)


def test_run_without_mpiexec_says_how_to_launch(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for v in launchenv.RANK_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(mpi, "_world", lambda: pytest.fail("MPI initialized unlaunched"))
    with pytest.raises(ConfigError) as info:
        polybus.run(_app(tmp_path))
    assert "started without mpiexec" in str(info.value)


def test_run_without_mpiexec_or_mpi4py_says_mpi4py_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # check said "needs mpi4py"; run only said to use mpiexec, which would then fail.
    for v in launchenv.RANK_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # (does not import)
    with pytest.raises(ConfigError) as info:
        polybus.run(_app(tmp_path))
    assert info.value.bare_message.endswith(
        "started without mpiexec (1 process); and it needs mpi4py, which is not installed")
    assert info.value.hint is not None
    assert info.value.hint.startswith("pip install 'polybus[mpi]', then mpiexec -n 6 ")


def test_request_ends_a_wait_from_another_thread() -> None:
    stop = StopSignals(())
    try:
        threading.Timer(0.05, stop.request).start()
        assert stop.wait(10.0) is True
        assert stop.requested and stop.signum is None
    finally:
        stop.close()


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_check_refuses_a_registry_beside_an_engine_that_makes_its_own(
        tmp_path: Path, engine: str) -> None:
    _, found = validate(_app(tmp_path), (f"cluster.engine={engine}",
                                         'cluster.registry="127.0.0.1:7700"'))
    assert [(e.key, e.bare_message) for e in found] == [
        ("cluster.registry", f"the {engine} engine starts its own registry; it uses no other")]


def test_a_forgotten_engine_under_mpiexec_is_said(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of mpiexec's processes would run the whole program with its own replicas."""
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    with pytest.warns(ConfigWarning, match="started by an MPI launcher as one of 3"):
        assert polybus.run(_app(tmp_path), {"cluster.engine": "local"},
                           worker_output=False).result == 1


def test_only_rank_0_is_not_a_serving_rank(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """(`polybus serve` binds its front door's port on rank 0 alone.)"""
    app = load(_app(tmp_path))
    for v in launchenv.RANK_VARS:
        monkeypatch.delenv(v, raising=False)
    assert not serving_rank(app)
    monkeypatch.setenv("PMIX_RANK", "0")
    assert not serving_rank(app)
    monkeypatch.setenv("PMIX_RANK", "2")
    assert serving_rank(app)
    assert not serving_rank(load(_app(tmp_path), ("cluster.engine=local",)))
