"""latency (seeds/004): round trip of a call with 0 .. 10000-byte payloads, and 1 MB.

Peers side by side: a raw Python socket ping-pong (TCP, and a Unix socket for the ipc
transport; over TCP also polling before it blocks, as polybus waits by default), and a
C TCP ping-pong (the floor). Each figure is the median over
repetitions, each repetition the mean of many round trips on one open connection.
Each size starts with one untimed repetition; before the first size, polybus, the raw
sockets and pyzmq also make ``WARMUP_S`` seconds of untimed round trips (a cluster or
server just started is still settling: without them polybus took 80 µs at 0 B and 38 at
1000 B); ``QUICK_WARMUP_S`` under --quick, which proves the run works. The C ping-pong
runs a fresh pair of processes for each size, every size alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from polybus.bench import peer_rows as optional_peers
from polybus.bench._common import MB, fmt_bytes, try_peer
from polybus.bench._common import PLACEMENT_NOTE as _PLACEMENT_NOTE
from polybus.bench._common import unique as _unique
from polybus.bench.peers import cpingpong, rawsocket
from polybus.bench.placement import DEFAULT, Placement
from polybus.bench.polybus_runs import call_path_rows
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.transport.spinning import SPIN_S

__all__ = ["METRIC", "QUICK_WARMUP_S", "WARMUP_S", "Plan", "add_ratios", "peer_rows", "plan",
           "polybus_rows", "run", "warm_for", "warmed_sizes", "warmup_s"]

T = TypeVar("T")
#: untimed round trips for this long before a system's first timed size
WARMUP_S = 0.5
#: --quick's: each system still warms up before its first size, for less long (five
#: warm-ups of WARMUP_S were 2.5 s of a quick run, both ends busy)
QUICK_WARMUP_S = 0.1

METRIC = "rtt_us"
# The raw socket ping-pong as a plain program writes it (blocking reads: wait=block), and
# as polybus waits by default (polls SPIN_S before blocking, both ends: wait=poll): the
# same technique, raw. (One system name, BENCHMARKS.md's; the config tells them apart.)
_RAW: list[tuple[str, rawsocket.Family, float]] = [
    ("block", "tcp", 0.0), ("block", "unix", 0.0), ("poll", "tcp", SPIN_S)]
SIZES = [0, 500, 1000, 2000, 4000, 6000, 8000, 10000, 1 * MB]
QUICK_SIZES = [0, 1000, 10000]


class Plan:
    """What to measure: the payload sizes, repetitions, and round trips per repetition."""

    def __init__(self, quick: bool) -> None:
        self.sizes = QUICK_SIZES if quick else SIZES
        self.reps = 3 if quick else 7
        self.budget = 200 if quick else 2000  # round trips per repetition for small sizes
        # free: nothing pinned, as a user's own run is (the scheduler may put both ends
        # on one CPU or on two, and moves them); split and same are its two extremes.
        self.placements: list[Placement] = ["split"] if quick else ["split", "same", "free"]
        self.warmup_s = warmup_s(quick)

    def iters(self, size: int) -> int:
        return rawsocket.iters_for(size, self.budget)


def plan(quick: bool) -> Plan:
    return Plan(quick)


def warmup_s(quick: bool) -> float:
    """Seconds of untimed round trips before a system's first timed size."""
    return QUICK_WARMUP_S if quick else WARMUP_S


def warm_for(round_trips: Callable[[int], object], seconds: float, batch: int = 50) -> int:
    """``round_trips(batch)``, untimed, once at least and until ``seconds`` have
    passed; how many batches were made."""
    made, end = 0, time.perf_counter() + seconds
    while made == 0 or time.perf_counter() < end:
        round_trips(batch)
        made += 1
    return made


def warmed_sizes(warm: Callable[[int], object], measure: Callable[[int], T],
                 sizes: Sequence[int], seconds: float | None = None) -> dict[int, T]:
    """``measure(size)`` for each size, after ``warm_for(warm, seconds)`` (WARMUP_S)."""
    warm_for(warm, WARMUP_S if seconds is None else seconds)
    return {size: measure(size) for size in sizes}


def polybus_rows(quick: bool, result: BenchResult | None = None) -> list[Row]:
    """Sync echo round trips through a real local cluster, at each size and placement.

    One cluster per (placement, transport); the client times ``iters(size)`` calls per
    repetition, like the raw socket peer. Transports that cannot run here are recorded
    in ``result.skipped`` (as ``polybus ipc``) when a result is given.
    """
    p = plan(quick)
    args = [p.sizes, p.reps, [p.iters(s) for s in p.sizes], p.warmup_s]
    return call_path_rows("latency", args, "rtt_us", METRIC, p.sizes, p.placements,
                          ["tcp"] if quick else ["tcp", "ipc", "shm"], result)


def peer_rows(result: BenchResult, quick: bool, progress: Progress) -> None:
    p = plan(quick)
    for cpus in p.placements:
        for wait, family, poll_s in _RAW:
            with rawsocket.RawSocketPeer(family, cpus, poll_s) as peer:
                stats = warmed_sizes(partial(peer.rtt_us, p.sizes[0], 1, warmup=0),
                                     partial(_rtt, peer.rtt_us, p.reps, p.iters), p.sizes,
                                     p.warmup_s)
                for size, st in stats.items():
                    cfg = {"transport": family, "cpus": cpus, "wait": wait}
                    result.add(Row.of("raw_socket", cfg, size, METRIC, st))
                    progress.advance(f"latency raw_socket {family} wait={wait} {cpus} "
                                     f"{fmt_bytes(size)}")
        for size in p.sizes:
            cst = try_peer(result, "c_socket",
                           partial(cpingpong.rtt_us, size, p.reps, p.iters(size), cpus))
            if cst is not None:
                cfg = {"transport": "tcp", "cpus": cpus}
                result.add(Row.of("c_socket", cfg, size, METRIC, cst))
            progress.advance(f"latency c_socket {cpus} {fmt_bytes(size)}")


def _rtt(rtt_us: Callable[[int, int, int], T], reps: int, iters: Callable[[int], int],
         size: int) -> T:
    return rtt_us(size, reps, iters(size))


def add_ratios(result: BenchResult) -> None:
    """Ratios of figures from this run: raw/C, and polybus against both (when present)."""
    for size in sorted({r.x for r in result.rows}):
        at = f"rtt at {int(size)} B"
        for cpus in _unique(str(r.config.get("cpus", DEFAULT)) for r in result.rows):
            on = "" if cpus == DEFAULT else f" (cpus={cpus})"
            tcp = {"transport": "tcp", "cpus": cpus}
            raw_tcp = result.find("raw_socket", size, METRIC, {**tcp, "wait": "block"})
            c = result.find("c_socket", size, METRIC, tcp)
            result.add_ratio(f"raw_socket/c_socket {at}{on}", raw_tcp, c)
            for r in result.rows:
                if r.system != "polybus" or r.x != size or r.config.get("cpus", DEFAULT) != cpus:
                    continue
                transport = str(r.config.get("transport", "tcp"))
                if transport == "tcp":
                    result.add_ratio(f"polybus/raw_socket {at}{on}", r, raw_tcp)
                    result.add_ratio(f"polybus/raw_socket wait=poll {at}{on}", r,
                                     result.find("raw_socket", size, METRIC,
                                                 {**tcp, "wait": "poll"}))
                    result.add_ratio(f"polybus/c_socket {at}{on}", r, c)
                else:
                    raw_unix = result.find("raw_socket", size, METRIC,
                                           {"transport": "unix", "cpus": cpus, "wait": "block"})
                    result.add_ratio(f"polybus/raw_socket {at} ({r.label} vs unix)", r, raw_unix)


def run(quick: bool, progress: Progress) -> BenchResult:
    p = plan(quick)
    result = BenchResult("latency", {"sizes": p.sizes, "reps": p.reps,
                                     "round_trips_per_rep": [p.iters(s) for s in p.sizes],
                                     "warmup_s": p.warmup_s},
                         x_label="payload bytes")
    result.params["placements"] = list(p.placements)
    result.notes.append(_PLACEMENT_NOTE)
    progress.begin(4 * len(p.sizes) * len(p.placements) + 2 * len(p.placements) + 3, "latency")
    peer_rows(result, quick, progress)
    optional_peers.latency(result, p, p.iters, quick, progress)  # mpi4py, pyzmq, ray, dask
    result.rows.extend(polybus_rows(quick, result))
    progress.advance("latency polybus")
    add_ratios(result)
    optional_peers.latency_ratios(result)
    return result
