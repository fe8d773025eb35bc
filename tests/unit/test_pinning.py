"""pinning.py in one process: what `check_here` checks where."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polybus.config import load
from polybus.engines.launchenv import RANK_VARS
from polybus.errors import ConfigError
from polybus.pinning import can_pin, check_here
from polybus.testing.apps import write_one_call_app

pytestmark = pytest.mark.skipif(
    not can_pin() or len(os.sched_getaffinity(0)) < 2,
    reason="pinning needs Linux's CPU affinity and 2 CPUs this process may run on")

NOT_HERE = 4095  # (a CPU number no test machine gives)


@pytest.fixture
def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@pytest.fixture
def no_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in RANK_VARS:
        monkeypatch.delenv(v, raising=False)


@pytest.mark.usefixtures("no_rank")
def test_an_mpi_rank_that_serves_does_not_check_the_clients_cpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank runs `polybus run`; only rank 0 runs the client. A launcher that binds
    each rank to CPUs of its own (Open MPI's default for 2 ranks, srun --cpu-bind) gave
    rank 1 CPUs other than the client's: rank 1 refused the client's cpus, and the job
    hung (rank 0 waited for it)."""
    app = load(write_one_call_app(tmp_path), ("cluster.engine=mpi",
                                              f"modules.client.cpus=[{NOT_HERE}]"))
    with pytest.raises(ConfigError) as err:  # (rank 0: the client runs here)
        check_here(app)
    assert err.value.key == "modules.client.cpus"
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    with pytest.raises(ConfigError):
        check_here(app)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")  # (a rank that serves a replica)
    check_here(app)
    # the local engine's client runs where `run` is called, whatever a launcher says
    check_here(load(write_one_call_app(tmp_path / "other"),
                    (f"modules.server.cpus=[{NOT_HERE}]",)), registry=True)
    with pytest.raises(ConfigError):
        check_here(load(write_one_call_app(tmp_path / "local"),
                        (f"modules.client.cpus=[{NOT_HERE}]",)))
