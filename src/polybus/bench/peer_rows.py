"""Rows of the optional peers (mpi4py, pyzmq, Ray, Dask) for the benchmarks of record.

Each function adds its peers' rows to a benchmark's result in the same run as polybus,
records how each peer was run under ``params["peers"]``, and a peer that cannot run
here becomes a skipped row with its reason. The ``*_ratios`` functions compare polybus
with them (the targets of the benchmarks page), once every row is in.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from polybus.bench._common import fmt_bytes, try_peer
from polybus.bench.peers import PeerUnavailable
from polybus.bench.placement import DEFAULT, Placement
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat, summarize

__all__ = ["bandwidth", "bandwidth_ratios", "ep_rows", "ep_times", "latency", "latency_ratios",
           "leave_out_mpi_tcp", "matmul", "mpi_ratios", "sort", "sort_steps", "throughput",
           "throughput_ratios"]

RAY_QUICK = ("left out of --quick: starting a Ray session took 2.6-10.6 s here (measured), "
             "plus its shutdown; see the full run")
DASK_QUICK = ("left out of --quick: a Dask driver (dask.distributed imported, a LocalCluster "
              "of 2 worker processes started and closed) took 4.4-8.3 s of each quick run "
              "here (measured); see the full run")
#: round trips per repetition for Ray and Dask, whose calls take ~1-10 ms here
SLOW_ITERS = 50


#: Open MPI transports the compute benchmarks run mpi4py over: its shared memory (its best
#: on one host) and TCP over loopback (like for like with polybus's tcp rows)
MPI_TRANSPORTS = ("sm", "tcp")
#: which polybus transport is compared with which mpi4py transport (like for like)
MPI_LIKE = {"tcp": "tcp", "shm": "sm", "ipc": "sm"}


def _mpi_system(transport: str) -> str:
    """The name a skipped mpi4py run is recorded under (tcp may be skipped alone)."""
    return "mpi4py" if transport == "sm" else f"mpi4py ({transport})"


MPI_TCP_QUICK = ("left out of --quick: the same mpi4py program as over shared memory, "
                 "over Open MPI's TCP transport, took 0.4-1.5 s a launch here (measured), "
                 "a launch per cell; see the full run")


def leave_out_mpi_tcp(result: BenchResult) -> None:
    """--quick (matmul, ep): mpi4py runs over shared memory alone, as polybus runs
    without its ipc transport there; the tcp cells are skipped, saying so."""
    result.skipped.setdefault(_mpi_system("tcp"), MPI_TCP_QUICK)


def mpi_ratios(result: BenchResult, name: str, mine: Row | None, polybus_transport: str,
               x: float, config: dict[str, Any]) -> None:
    """polybus/mpi4py against mpi4py over the like transport, and, for tcp, also against
    mpi4py's shared memory (MPI's best on one host), each ratio saying which it is."""
    like = MPI_LIKE.get(polybus_transport, "sm")
    for mt in dict.fromkeys([like, "sm"]):
        theirs = result.find("mpi4py", x, "seconds", {**config, "transport": mt})
        result.add_ratio(f"polybus/mpi4py {name} (mpi4py {mt})", mine, theirs)


class _SizePlan(Protocol):
    sizes: list[int]
    reps: int
    placements: list[Placement]


def _record(result: BenchResult, system: str, info: dict[str, Any]) -> None:
    """How ``system`` was run, under ``params["peers"]``; nothing for a peer skipped (its
    parameters were kept: Ray's round trips per repetition, though Ray did not run)."""
    if system not in result.skipped:
        result.params.setdefault("peers", {}).setdefault(system, {}).update(info)


def _record_mpi(result: BenchResult, **more: str) -> None:
    """How mpi4py was launched, in the result's params; nothing if it cannot be (not
    installed: its rows are skipped already, and the benchmark goes on)."""
    from polybus.bench.peers import mpi

    try:
        _record(result, "mpi4py", {**mpi.describe(), **more})
    except PeerUnavailable:
        pass


def _leave_out_slow_peers(result: BenchResult) -> None:
    """--quick: Ray and Dask are not started (each driver's start-up alone is seconds);
    their rows are skipped with the reason, as a peer that cannot run here is."""
    result.skipped.setdefault("ray", RAY_QUICK)
    result.skipped.setdefault("dask", DASK_QUICK)


def _slow_peer(result: BenchResult, system: str, quick: bool, kind: str,
               run: Callable[[], tuple[list[Stat], float]]) -> list[Stat] | None:
    """Ray or Dask: run one driver; record its start-up; skip with the reason if not."""
    def go() -> tuple[list[Stat], float]:
        return run()
    got = try_peer(result, system, go)
    if got is None:
        return None
    stats, startup = got
    _record(result, system, {f"startup_s ({kind})": round(startup, 3)})
    return stats


def latency(result: BenchResult, p: _SizePlan, iters: Callable[[int], int], quick: bool,
            progress: Progress) -> None:
    from polybus.bench.peers import dask_peer, mpi, ray_peer, zmq_peer

    for cpus in p.placements:
        st = try_peer(result, "mpi4py", partial(mpi.rtt_us, p.sizes, p.reps,
                                                [iters(s) for s in p.sizes], cpus))
        for size, s in (st or {}).items():
            result.add(Row.of("mpi4py", {"transport": "sm", "cpus": cpus}, size, "rtt_us", s))
        progress.advance(f"latency mpi4py {cpus}")

        def zmq_rows(cpus: Placement = cpus) -> dict[int, Stat]:
            from polybus.bench.b_latency import warmed_sizes, warmup_s

            with zmq_peer.ZmqPeer(cpus) as peer:  # (warmed as b_latency's own peers)
                return warmed_sizes(partial(peer.rtt_us, p.sizes[0], 1),
                                    lambda n: peer.rtt_us(n, p.reps, iters(n)), p.sizes,
                                    warmup_s(quick))
        for size, s in (try_peer(result, "pyzmq", zmq_rows) or {}).items():
            result.add(Row.of("pyzmq", {"transport": "tcp", "cpus": cpus}, size, "rtt_us", s))
        progress.advance(f"latency pyzmq {cpus}")
    _record_mpi(result)
    few = [min(iters(s), SLOW_ITERS) for s in p.sizes]
    if quick:
        _leave_out_slow_peers(result)
    for system, mod, cfg in (("ray", ray_peer, ray_peer.CONFIG),
                             ("dask", dask_peer, dask_peer.CONFIG)):
        stats = _slow_peer(result, system, quick, "latency",
                           partial(mod.measure, "latency", [p.sizes, p.reps, few]))
        for size, s in zip(p.sizes, stats or [], strict=False):
            result.add(Row.of(system, cfg, size, "rtt_us", s))
        _record(result, system, {"round_trips_per_rep": few})
        progress.advance(f"latency {system}")


def latency_ratios(result: BenchResult) -> None:
    """polybus/mpi4py per size, placement and transport (mpi4py runs over shared memory:
    its like is polybus shm); polybus/pyzmq over tcp; ray/polybus and dask/polybus per
    size and transport: Ray and Dask place their own processes (cpus=free), so against
    polybus at cpus=split (its row of record) and at cpus=free (nothing pinned on either
    side, as a user's own runs are)."""
    for r in [r for r in result.rows if r.system == "polybus" and r.metric == "rtt_us"]:
        cpus = r.config.get("cpus", DEFAULT)
        transport = r.config.get("transport", "tcp")
        at = f"rtt at {int(r.x)} B"
        on = [] if cpus == DEFAULT else [f"cpus={cpus}"]
        via = [] if transport == "tcp" else [f"transport={transport}"]
        label = f" (polybus {','.join(via + on)})" if via else f" ({on[0]})" if on else ""
        # (named with both transports: mpi4py's is always its shared memory)
        result.add_ratio(f"polybus/mpi4py {at} (polybus {transport} vs mpi4py sm"
                         f"{''.join(', ' + o for o in on)})", r,
                         result.find("mpi4py", r.x, "rtt_us", {"cpus": cpus}))
        if transport == "tcp":
            result.add_ratio(f"polybus/pyzmq {at}{label}", r,
                             result.find("pyzmq", r.x, "rtt_us", {"cpus": cpus}))
        if cpus in (DEFAULT, "free"):
            for peer in ("ray", "dask"):
                result.add_ratio(f"{peer}/polybus {at} ({peer} cpus=free, polybus "
                                 f"{','.join([*via, f'cpus={cpus}'])})",
                                 result.find(peer, r.x, "rtt_us"), r)


def bandwidth(result: BenchResult, p: _SizePlan, quick: bool, progress: Progress) -> None:
    from polybus.bench.peers import dask_peer, mpi, ray_peer, zmq_peer

    for cpus in p.placements:
        st = try_peer(result, "mpi4py", partial(mpi.bandwidth_gbps, p.sizes, p.reps, cpus))
        for size, s in (st or {}).items():
            result.add(Row.of("mpi4py", {"transport": "sm", "cpus": cpus}, size, "gbps", s))
        progress.advance(f"bandwidth mpi4py {cpus}")

        def zmq_rows(cpus: Placement = cpus) -> dict[int, Stat]:
            with zmq_peer.ZmqPeer(cpus) as peer:
                return {s: peer.bandwidth_gbps(s, p.reps) for s in p.sizes}
        for size, s in (try_peer(result, "pyzmq", zmq_rows) or {}).items():
            result.add(Row.of("pyzmq", {"transport": "tcp", "cpus": cpus}, size, "gbps", s))
        progress.advance(f"bandwidth pyzmq {cpus}")
    _record_mpi(result)
    if quick:
        _leave_out_slow_peers(result)
    for system, mod, cfg in (("ray", ray_peer, ray_peer.CONFIG),
                             ("dask", dask_peer, dask_peer.CONFIG)):
        stats = _slow_peer(result, system, quick, "bandwidth",
                           partial(mod.measure, "bandwidth", [p.sizes, p.reps]))
        for size, s in zip(p.sizes, stats or [], strict=False):
            result.add(Row.of(system, cfg, size, "gbps", s))
        progress.advance(f"bandwidth {system}")
    _record(result, "ray", {"transfer": "ray.put(array) + an actor call taking the ref"})
    _record(result, "dask", {"transfer": "client.scatter(array, workers=[one])"})


def bandwidth_ratios(result: BenchResult) -> None:
    for r in [r for r in result.rows if r.system == "polybus" and r.metric == "gbps"]:
        cpus = r.config.get("cpus", DEFAULT)
        suffix = f" ({r.label})"
        at = f"GB/s at {fmt_bytes(r.x)}"
        # (named with both transports, as latency's: mpi4py runs over its shared memory
        # alone, pyzmq over TCP alone, whatever polybus's transport)
        result.add_ratio(f"polybus/mpi4py {at} ({r.label} vs mpi4py sm)", r,
                         result.find("mpi4py", r.x, "gbps", {"cpus": cpus}))
        if cpus == DEFAULT:
            result.add_ratio(f"polybus/pyzmq {at} ({r.label} vs pyzmq tcp)", r,
                             result.find("pyzmq", r.x, "gbps", {"cpus": cpus}))
        if cpus in (DEFAULT, "free"):  # (Ray and Dask place their own processes: against
            for peer in ("ray", "dask"):  # the row of record, and like for like)
                result.add_ratio(f"polybus/{peer} {at}{suffix}", r,
                                 result.find(peer, r.x, "gbps"))


def throughput(result: BenchResult, workers: int, quick: bool, progress: Progress) -> None:
    from polybus.bench.peers import dask_peer, mpi, ray_peer

    reps = 3 if quick else 5
    calls = {"mpi4py": 2_000 if quick else 40_000, "ray": 4_000, "dask": 1_000}
    result.params["calls"].update(calls)
    st = try_peer(result, "mpi4py", partial(mpi.calls_per_s, calls["mpi4py"], reps, workers))
    if st is not None:
        result.add(Row.of("mpi4py", {"tasks": "on demand, 1 per worker", "ranks": workers + 1},
                          workers, "calls_per_s", st))
        _record_mpi(result)
    progress.advance("throughput mpi4py")
    if quick:
        _leave_out_slow_peers(result)
    for system, mod, cfg in (("ray", ray_peer, ray_peer.CONFIG),
                             ("dask", dask_peer, dask_peer.CONFIG)):
        stats = _slow_peer(result, system, quick, "throughput",
                           partial(mod.measure, "throughput", [calls[system], reps]))
        if stats:
            result.add(Row.of(system, cfg, workers, "calls_per_s", stats[0]))
        progress.advance(f"throughput {system}")


def throughput_ratios(result: BenchResult, workers: int) -> None:
    for r in [r for r in result.rows if r.system == "polybus" and r.metric == "calls_per_s"]:
        for peer in ("mpi4py", "ray", "dask"):
            result.add_ratio(f"{r.label} / {peer} calls/s", r,
                             result.find(peer, workers, "calls_per_s"))


#: the size of bench sort's target (a full run's): insertion sort on 2 workers
SORT_TARGET = 2**16


def _sort_target(sizes: dict[str, list[int]], real: Sequence[int], quick: bool) -> bool:
    """Whether `sort` runs the target besides the rows (a full run, 2 workers real)."""
    return not quick and 2 in real and SORT_TARGET not in sizes.get("insertion", [])


def sort_steps(sizes: dict[str, list[int]], real: Sequence[int], quick: bool) -> int:
    """The progress steps `sort` advances: one per mpi4py cell (skipped or not), and the
    target's. (b_sort's count left them out: its bar said 12/8.)"""
    return sum(map(len, sizes.values())) * len(real) + _sort_target(sizes, real, quick)


def sort(result: BenchResult, sizes: dict[str, list[int]], real: Sequence[int], reps: int,
         warmup: int, server: Path, polybus_seconds: Callable[[str, int, int], Stat],
         quick: bool, progress: Progress) -> None:
    """mpi4py beside every real polybus row (``warmup`` untimed sorts, then ``reps``, as
    polybus); in a full run also the target: insertion sort of 2^16 elements on 2
    workers, polybus and mpi4py side by side."""
    from polybus.bench.peers import mpi

    def add(algo: str, n: int, k: int) -> None:
        st = try_peer(result, "mpi4py", partial(mpi.sort_seconds, n, algo, k, reps, server,
                                                warmup))
        if st is not None:
            result.add(Row.of("mpi4py", {"algorithm": algo, "workers": k, "ranks": k}, n,
                              "seconds", st))
        progress.advance(f"sort mpi4py {algo} {n} x{k}")

    for algo, ns in sizes.items():
        for n in ns:
            for k in real:
                add(algo, n, k)
    target = SORT_TARGET
    if _sort_target(sizes, real, quick):
        add("insertion", target, 2)
        if "mpi4py" not in result.skipped:
            st = polybus_seconds("insertion", target, 2)
            result.add(Row.of("polybus", {"algorithm": "insertion", "workers": 2,
                                          "model": "real"}, target, "seconds", st))
    _record_mpi(result, program="rank 0 scatters (Scatterv), every rank sorts its part, "
                "rank 0 gathers and merges")
    for r in [r for r in result.rows if r.system == "mpi4py"]:
        how, workers = r.config["algorithm"], r.config["workers"]
        result.add_ratio(f"polybus/mpi4py seconds {how} n={int(r.x)} workers={workers}",
                         result.find("polybus", r.x, "seconds",
                                     {"algorithm": how, "workers": workers, "model": "real"}),
                         r)


def matmul(result: BenchResult, sizes: Sequence[int], servers: Sequence[int],
           reps_of: Callable[[int], int], progress: Progress, chunk_of: Callable[[int], int],
           warmup: int = 0) -> None:
    """mpi4py master/worker beside polybus at every real server count, both modes, on the
    same tasks (``chunk_of(n)`` rows of A each, ``reps_of(n)`` products), over shared
    memory and over loopback TCP; b_matmul adds the ratios."""
    from polybus.bench.peers import mpi

    cpus = os.cpu_count() or 1

    cells = [(n, mode, k) for n in sizes for mode in ("stateless", "stateful")
             for k in servers if k <= cpus]

    def over(transport: str) -> None:  # a transport that cannot run is skipped once
        for i, (n, mode, k) in enumerate(cells):
            st = try_peer(result, _mpi_system(transport), partial(
                mpi.matmul_seconds, n, k, mode == "stateful", reps_of(n), chunk_of(n),
                transport, warmup))
            if st is None:  # (every cell's step, as b_matmul counts them: it fell short)
                for _ in cells[i:]:
                    progress.advance(f"matmul mpi4py {transport} skipped")
                return
            progress.advance(f"matmul mpi4py {transport} {mode} n={n} servers={k}")
            cfg: dict[str, str | int] = {"n": n, "mode": mode, "ranks": k + 1,
                                         "transport": transport}
            result.add(Row.of("mpi4py", cfg, k, "seconds", st))
    for transport in MPI_TRANSPORTS:
        over(transport)
    _record_mpi(result, program="rank 0 hands one block of rows at a time to each worker "
                "rank on demand (buffer Send/Recv); stateless sends B with every block, "
                "stateful broadcasts B once per repetition (timed)")


def ep_times(result: BenchResult, n: int, block: int, k: int, reps: int,
             transport: str, warmup: int = 0) -> list[float] | None:
    """One launch of mpi4py's master/worker on the ep tasks (``k`` workers, over
    ``transport``, ``warmup`` untimed products first): each timed repetition's seconds,
    or None if mpi4py (or that transport) cannot run here, recorded as skipped with the
    reason."""
    from polybus.bench.peers import mpi

    return try_peer(result, _mpi_system(transport),
                    partial(mpi.ep_times, n, block, k, reps, transport, warmup))


def ep_rows(result: BenchResult, times: dict[tuple[str, int], list[float]]) -> None:
    """The mpi4py rows of ep from the seconds `ep_times` gave, per (transport, workers),
    pooled over the benchmark's rounds; how mpi4py was launched, in the params."""
    for (transport, k), seconds in times.items():
        result.add(Row.of("mpi4py", {"tasks": "on demand, 1 per worker", "ranks": k + 1,
                                     "transport": transport}, k, "seconds", summarize(seconds)))
    _record_mpi(result)
