"""What a launcher (mpiexec, srun) tells a process it started, and the BLAS threads of a
rank that serves a replica, read from the environment alone.

numpy's BLAS starts a thread per CPU in every process, so replicas of a matrix-heavy
module on one host fight over the CPUs (2 replicas on 2 CPUs ran a multiplying server
5-20x slower than one). The local engine gives each worker its share of the CPUs
(engines/local.py); under the mpi engine each rank that serves a replica (rank 1 and
up) takes its share of its host's CPUs among the ranks there, as the local engine's
workers do (a trial's 600x600 product took 0.25-0.36 s over mpi against 0.07-0.12 s
locally). numpy has loaded its BLAS by then (the run's modules import it), so the count
is also given to the loaded library. Rank 0 runs the program, whose BLAS is left as it
is, as the local engine leaves the client's; so is every process not serving an mpi
engine's replica (a worker started by hand under srun, a local-engine run under a
launcher). A run whose environment sets any of these is left exactly as set.

The ranks on a host are what the launcher says: Open MPI's and MPICH Hydra's count; under
srun without those, Slurm's tasks on this node (`slurm_tasks_here`); else the whole job
is taken to be here (a rank gets too few threads, never too many).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["BLAS_VARS", "LOCAL_VARS", "RANK_VARS", "SIZE_VARS", "SLURM_VARS", "blas_threads",
           "launched_rank", "local_size", "rank_blas", "set_loaded_blas_threads",
           "slurm_tasks_here", "tasks_per_node", "world_size"]

BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")
SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
# ranks on this host (Open MPI, MPICH's Hydra); else Slurm's, else the whole job's
LOCAL_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")
# What srun exports of the step's layout (srun(1), OUTPUT ENVIRONMENT VARIABLES): the
# tasks of each node, the step's first (sbatch's job-wide one when only it is set), this
# node's place in that list, this task's place on its node
SLURM_VARS = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID",
              "SLURM_LOCALID")
_RUN = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")  # "3", or "3(x2)": 3 on each of 2 nodes


def _count(text: str) -> bool:
    """Whether ``text`` is a whole number int() reads (ASCII digits: not "²")."""
    return text.isascii() and text.isdigit()


Environ = Mapping[str, str]


def _first(names: tuple[str, ...], environ: Environ | None = None) -> int | None:
    env = os.environ if environ is None else environ
    for v in names:
        if _count(env.get(v, "")):
            return int(env[v])
    return None


def launched_rank() -> int | None:
    """This process's rank as its launcher set it, or None if no launcher started it."""
    return _first(RANK_VARS)


def world_size(environ: Environ | None = None) -> int | None:
    """How many processes the launcher started, as it says (None if it does not)."""
    return _first(SIZE_VARS, environ)


def local_size(environ: Environ | None = None) -> int | None:
    """How many of them run on this host, as the launcher says: Open MPI's or Hydra's
    count, else Slurm's (`slurm_tasks_here`), else the world size."""
    return (_first(LOCAL_VARS, environ) or slurm_tasks_here(environ)
            or world_size(environ))


def tasks_per_node(text: str) -> list[int] | None:
    """Slurm's compressed tasks per node, expanded: "2(x3),1" is [2, 2, 2, 1] (a count
    followed by "(xN)" holds for N consecutive nodes); None if it is not of that form."""
    counts: list[int] = []
    for part in text.split(","):
        m = _RUN.fullmatch(part) if part.isascii() else None
        if m is None:
            return None
        n, times = int(m.group(1)), int(m.group(2) or 1)
        if n < 1 or times < 1:
            return None
        counts += [n] * times
    return counts


def slurm_tasks_here(environ: Environ | None = None) -> int | None:
    """How many tasks of the step srun started on this node: this node's entry
    (SLURM_NODEID) of its tasks per node. None when Slurm does not say, or says
    something that does not add up: a node or local task id past the list, or a job
    whose task count is not the launcher's (a launcher of its own run inside an
    allocation, whose per-node counts are not of its ranks)."""
    env = os.environ if environ is None else environ
    text = env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE"))
    counts = tasks_per_node(text) if text is not None else None
    node = _first(("SLURM_NODEID",), env)
    if counts is None or node is None or node >= len(counts):
        return None
    local = _first(("SLURM_LOCALID",), env)
    if (local is not None and local >= counts[node]) or world_size(env) != sum(counts):
        return None
    return counts[node]


def blas_threads(environ: dict[str, str] | os._Environ[str], sharers: int,
                 pinned: frozenset[int] | None = None) -> dict[str, str]:
    """The BLAS thread settings for one of ``sharers`` processes sharing this process's
    CPUs, or nothing if the environment sets any of them; for a process its module's
    ``cpus`` pins to ``pinned`` (pinning.py), no more than those CPUs."""
    if any(v in environ for v in BLAS_VARS):
        return {}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = (cpus or 1) // max(1, sharers)
    if pinned:
        share = min(share, len(pinned))
    return dict.fromkeys(BLAS_VARS, str(max(1, share)))


def rank_blas(pinned: frozenset[int] | None = None) -> dict[str, str]:
    """This rank serves a replica (the mpi engine's `serve_rank`): its share of the
    host's CPUs for BLAS, among the ranks the launcher started there, set in the
    environment (for what loads BLAS later, and processes it starts) and in the BLAS
    numpy has loaded already (`set_loaded_blas_threads`); what was set (nothing when
    the environment sets any of them). A rank the launcher bound to CPUs of its own
    (fewer than the host's share) takes them all: they are its share already; one its
    module's ``cpus`` pins to ``pinned`` takes no more than those."""
    sharers = local_size() or 1
    if hasattr(os, "sched_getaffinity") and (
            len(os.sched_getaffinity(0)) * sharers <= (os.cpu_count() or 1)):
        sharers = 1  # (bound: its CPUs are its own)
    got = blas_threads(os.environ, sharers, pinned)  # (nothing if the environment sets any)
    os.environ.update(got)
    if got:
        set_loaded_blas_threads(int(got["OMP_NUM_THREADS"]))
    return got


_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
            "openblas_set_num_threads64_", "MKL_Set_Num_Threads")


def set_loaded_blas_threads(n: int) -> bool:
    """Tell the BLAS libraries this process has loaded (numpy's, found in
    /proc/self/maps) to use ``n`` threads; False if none was found."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f
                    if ("blas" in line.lower() or "mkl" in line.lower()) and ".so" in line}
    except OSError:
        return False
    done = False
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                done = True
                break
    return done
