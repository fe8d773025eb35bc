"""What a launcher (mpiexec, srun) tells a process it started, and the BLAS threads of a
rank that serves a replica, read from the environment alone.

This module imports nothing heavy: `rank_blas` runs before the command's modules are
imported, which import numpy, whose BLAS sizes its thread pool once, as it loads.

numpy's BLAS starts a thread per CPU in every process, so replicas of a matrix-heavy
module on one host fight over the CPUs (2 replicas on 2 CPUs ran a multiplying server
5-20x slower than one). The local engine gives each worker its share of the CPUs
(engines/local.py); under mpiexec each rank that serves a replica (rank 1 and up) takes
its share of its host's CPUs among the ranks there, as the local engine's workers do
(a trial's 600x600 product took 0.25-0.36 s over mpi against 0.07-0.12 s locally).
Rank 0 runs the program, whose BLAS is left as it is, as the local engine leaves the
client's. Either way, a run whose environment sets any of these is left exactly as set.
"""

from __future__ import annotations

import os

__all__ = ["BLAS_VARS", "LOCAL_VARS", "RANK_VARS", "SIZE_VARS", "blas_threads",
           "launched_rank", "local_size", "rank_blas", "world_size"]

BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
# ranks on this host (Open MPI, MPICH's Hydra); else the whole job is taken to be here
LOCAL_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


def _count(text: str) -> bool:
    """Whether ``text`` is a whole number int() reads (ASCII digits: not "²")."""
    return text.isascii() and text.isdigit()


def _first(names: tuple[str, ...]) -> int | None:
    for v in names:
        if _count(os.environ.get(v, "")):
            return int(os.environ[v])
    return None


def launched_rank() -> int | None:
    """This process's rank as its launcher set it, or None if no launcher started it."""
    return _first(RANK_VARS)


def world_size() -> int | None:
    """How many processes the launcher started, as it says (None if it does not)."""
    return _first(SIZE_VARS)


def local_size() -> int | None:
    """How many of them run on this host, as the launcher says (else the world size)."""
    return _first(LOCAL_VARS) or world_size()


def blas_threads(environ: dict[str, str] | os._Environ[str], sharers: int) -> dict[str, str]:
    """The BLAS thread settings for one of ``sharers`` processes sharing this process's
    CPUs, or nothing if the environment sets any of them."""
    if any(v in environ for v in BLAS_VARS):
        return {}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return dict.fromkeys(BLAS_VARS, str(max(1, (cpus or 1) // max(1, sharers))))


def rank_blas() -> dict[str, str]:
    """A process a launcher started as rank 1 or higher (it will serve a replica): its
    share of the host's CPUs for BLAS, set in the environment now, before numpy loads;
    what was set (nothing for rank 0, a process no launcher started, or an environment
    that sets any of them)."""
    rank = launched_rank()
    if rank is None or rank == 0:
        return {}
    got = blas_threads(os.environ, local_size() or 1)
    os.environ.update(got)
    return got
