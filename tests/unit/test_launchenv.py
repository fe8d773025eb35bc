"""engines/launchenv.py: what a launcher says, read from the environment, and the BLAS
share of a rank that serves a replica of the mpi engine."""

from __future__ import annotations

import os

import pytest

from polybus.engines import launchenv
from polybus.engines.launchenv import BLAS_VARS, rank_blas

LAUNCH_VARS = (*launchenv.RANK_VARS, *launchenv.SIZE_VARS, *launchenv.LOCAL_VARS,
               *launchenv.SLURM_VARS)


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


# Under srun (Slurm) without Open MPI's or Hydra's per-host counts: Slurm says the tasks
# of each node of the step, compressed ("3(x2),2": 3 on nodes 0 and 1, 2 on node 2), and
# which node this is (SLURM_NODEID, in the step's node order).
SRUN = {"SLURM_PROCID": "4", "SLURM_NTASKS": "8", "SLURM_NODEID": "1", "SLURM_LOCALID": "1",
        "SLURM_STEP_TASKS_PER_NODE": "3(x2),2", "SLURM_TASKS_PER_NODE": "3(x2),2"}


@pytest.mark.parametrize(("text", "counts"), [
    ("4", [4]), ("2(x3),1", [2, 2, 2, 1]), ("1,3(x2)", [1, 3, 3]), ("16(x1)", [16]),
    ("", None), ("2(x0)", None), ("0", None), ("2(x3", None), ("x,1", None), ("2,,1", None),
    ("²", None), ("2(3)", None), (" 2", None)])
def test_slurms_compressed_tasks_per_node(text: str, counts: list[int] | None) -> None:
    assert launchenv.tasks_per_node(text) == counts


@pytest.mark.parametrize(("env", "here"), [
    (SRUN, 3),
    ({**SRUN, "SLURM_NODEID": "2", "SLURM_LOCALID": "0"}, 2),
    ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": "1(x8)", "SLURM_NODEID": "5",
      "SLURM_LOCALID": "0"}, 1),
    ({k: v for k, v in SRUN.items() if k != "SLURM_STEP_TASKS_PER_NODE"}, 3),  # (the job's)
    ({**SRUN, "SLURM_NODEID": "3"}, None),         # (no such node in the list)
    ({**SRUN, "SLURM_LOCALID": "3"}, None),        # (a 4th task on a node of 3)
    ({**SRUN, "SLURM_NTASKS": "9"}, None),         # (not the job the launcher started)
    ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": "3(x2),two"}, None),
    ({k: v for k, v in SRUN.items() if k != "SLURM_NODEID"}, None),
])
def test_the_tasks_slurm_started_on_this_node(env: dict[str, str], here: int | None) -> None:
    assert launchenv.slurm_tasks_here(env) == here


def test_under_srun_a_serving_rank_shares_its_node_among_the_tasks_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """3 tasks of the 8 on this node's 8 CPUs: 2 threads each, not the whole job's
    8 / 8 = 1 (every task taken to be on this node)."""
    for k, v in SRUN.items():
        monkeypatch.setenv(k, v)
    assert launchenv.local_size() == 3
    assert rank_blas() == dict.fromkeys(BLAS_VARS, "2")


def test_open_mpis_own_count_comes_before_slurms(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {**SRUN, "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}.items():
        monkeypatch.setenv(k, v)
    assert launchenv.local_size() == 4


def test_slurms_counts_of_another_job_size_leave_the_whole_job_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher started inside an allocation with a task count of its own (PMI_SIZE
    16 against Slurm's 8): Slurm's per-node counts are not of its ranks."""
    for k, v in {**SRUN, "PMI_SIZE": "16"}.items():
        monkeypatch.setenv(k, v)
    assert launchenv.local_size() == 16


def test_a_rank_whose_replica_is_pinned_takes_no_more_than_its_cpus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica's ``cpus`` (pinning.py) pins it after its BLAS share was set from the
    host's CPUs: its share was then more threads than the CPUs it may run on."""
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")  # (8 CPUs / 2: 4 threads)
    assert rank_blas(frozenset({5})) == dict.fromkeys(BLAS_VARS, "1")
    assert launchenv.blas_threads({}, 2, frozenset({0, 1, 2, 3, 4, 5})) == dict.fromkeys(
        BLAS_VARS, "4")  # (never more than the share)
    assert launchenv.blas_threads({}, 1, frozenset({0, 1})) == dict.fromkeys(BLAS_VARS, "2")
