"""engines/launchenv.py: what a launcher says, read from the environment, and the BLAS
share of a rank that serves a replica."""

from __future__ import annotations

import os

import pytest

from polybus.engines import launchenv
from polybus.engines.launchenv import BLAS_VARS, rank_blas

LAUNCH_VARS = (*launchenv.RANK_VARS, *launchenv.SIZE_VARS, *launchenv.LOCAL_VARS)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in (*LAUNCH_VARS, *BLAS_VARS):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))


def test_a_serving_rank_takes_its_hosts_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "8")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")  # (3 of the 8 on this host)
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "2")
    assert all(os.environ[v] == "2" for v in BLAS_VARS)


def test_without_a_local_count_the_whole_job_is_taken_to_be_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "16")
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "1")  # (8 CPUs / 16, at least 1)


@pytest.mark.parametrize("rank", [None, "0"])
def test_rank_0_and_a_process_no_launcher_started_are_left_alone(
        monkeypatch: pytest.MonkeyPatch, rank: str | None) -> None:
    if rank is not None:
        monkeypatch.setenv("OMPI_COMM_WORLD_RANK", rank)
        monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    assert rank_blas() == {}
    assert not any(v in os.environ for v in BLAS_VARS)


def test_a_blas_variable_set_leaves_every_one_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    assert rank_blas() == {}
    assert [v for v in BLAS_VARS if v in os.environ] == ["MKL_NUM_THREADS"]


def test_a_count_that_is_not_ascii_digits_is_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "²")
    assert launchenv.launched_rank() is None
