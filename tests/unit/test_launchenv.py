"""engines/launchenv.py: what a launcher says, read from the environment, and the BLAS
share of a rank that serves a replica of the mpi engine."""

from __future__ import annotations

import os

import pytest

from polybus.engines import launchenv
from polybus.engines.launchenv import BLAS_VARS, rank_blas

LAUNCH_VARS = (*launchenv.RANK_VARS, *launchenv.SIZE_VARS, *launchenv.LOCAL_VARS)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    for v in (*LAUNCH_VARS, *BLAS_VARS):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    told: list[int] = []  # (this test process's own BLAS is left alone)
    monkeypatch.setattr(launchenv, "set_loaded_blas_threads", lambda n: told.append(n) or True)
    return told


def test_a_serving_rank_takes_its_hosts_share(monkeypatch: pytest.MonkeyPatch,
                                             _clean: list[int]) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "8")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")  # (3 of the 8 on this host)
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "2")
    assert all(os.environ[v] == "2" for v in BLAS_VARS)
    assert _clean == [2]  # (numpy's BLAS, loaded already, is told too)


def test_without_a_local_count_the_whole_job_is_taken_to_be_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMI_SIZE", "16")
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "1")  # (8 CPUs / 16, at least 1)


def test_a_rank_bound_to_cpus_of_its_own_takes_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3})  # (its 2 of the 8)
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "2")


def test_a_blas_variable_set_leaves_every_one_as_set(monkeypatch: pytest.MonkeyPatch,
                                                    _clean: list[int]) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    assert rank_blas() == {}
    assert [v for v in BLAS_VARS if v in os.environ] == ["MKL_NUM_THREADS"]
    assert _clean == []


def test_a_count_that_is_not_ascii_digits_is_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "²")
    assert launchenv.launched_rank() is None
