"""bandwidth (seeds/004): one-way transfer of 1 MB .. 256 MB numpy arrays, GB/s.

Peers side by side: a raw Python socket (sendall of the array's memoryview, recv_into
a preallocated buffer, one ack byte at the end; TCP and Unix socket), the C TCP
sender/receiver, and numpy memcpy between preallocated arrays (the limit).
GB is 1e9 bytes; MB is 1e6 bytes. Over ``shm`` polybus copies the array once, at the
sender, into a segment the replica views and its function (``sink``) does not read: the
peers' receivers copy it again into a buffer of their own, so that row can pass memcpy.
"""

from __future__ import annotations

from functools import partial

from polybus.bench import peer_rows as optional_peers
from polybus.bench._common import MB, PLACEMENT_NOTE, fmt_bytes, try_peer
from polybus.bench.peers import cpingpong, pools, rawsocket
from polybus.bench.placement import DEFAULT, Placement
from polybus.bench.polybus_runs import call_path_rows
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row

__all__ = ["METRIC", "Plan", "add_ratios", "peer_rows", "plan", "polybus_rows", "run"]

METRIC = "gbps"
SIZES = [1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB]
# (--quick proves the run works: a small and a large size; 64 MB took Dask alone ~4 s
# more than 16 MB, of a ~11 s quick run)
QUICK_SIZES = [1 * MB, 16 * MB]


class Plan:
    """What to measure: buffer sizes and repetitions (each after one untimed warm-up)."""

    def __init__(self, quick: bool) -> None:
        self.sizes = QUICK_SIZES if quick else SIZES
        self.reps = 3 if quick else 7
        self.placements: list[Placement] = ["split"] if quick else ["split", "same"]


def plan(quick: bool) -> Plan:
    return Plan(quick)


def polybus_rows(quick: bool, result: BenchResult | None = None) -> list[Row]:
    """One-way sync calls carrying a uint8 array through a real local cluster, GB/s.

    The worker answers with the array's size (a few bytes), as the raw peer acks with
    one byte. Transports that cannot run here go to ``result.skipped``.
    """
    p = plan(quick)
    return call_path_rows("bandwidth", [p.sizes, p.reps], "gbps", METRIC, p.sizes, p.placements,
                          ["tcp", "shm"] if quick else ["tcp", "ipc", "shm"], result)


def peer_rows(result: BenchResult, quick: bool, progress: Progress) -> None:
    p = plan(quick)
    for cpus in p.placements:
        for family in ("tcp", "unix"):
            with rawsocket.RawSocketPeer(family, cpus) as peer:
                for size in p.sizes:
                    st = peer.bandwidth_gbps(size, p.reps)
                    cfg = {"transport": family, "cpus": cpus}
                    result.add(Row.of("raw_socket", cfg, size, METRIC, st))
                    progress.advance(f"bandwidth raw_socket {family} {cpus} {fmt_bytes(size)}")
        for size in p.sizes:
            cst = try_peer(result, "c_socket",
                           partial(cpingpong.bandwidth_gbps, size, p.reps, cpus))
            if cst is not None:
                cfg = {"transport": "tcp", "cpus": cpus}
                result.add(Row.of("c_socket", cfg, size, METRIC, cst))
            progress.advance(f"bandwidth c_socket {cpus} {fmt_bytes(size)}")
    for size in p.sizes:
        result.add(Row.of("memcpy", {}, size, METRIC, pools.memcpy_gbps(size, p.reps)))
        progress.advance(f"bandwidth memcpy {fmt_bytes(size)}")


def add_ratios(result: BenchResult) -> None:
    """raw_socket/memcpy, and polybus against raw_socket and memcpy (when present)."""
    for size in sorted({r.x for r in result.rows}):
        at = f"GB/s at {fmt_bytes(size)}"
        mem = result.find("memcpy", size, METRIC)
        raw_split = result.find("raw_socket", size, METRIC, {"transport": "tcp", "cpus": DEFAULT})
        result.add_ratio(f"raw_socket/memcpy {at}", raw_split, mem)
        for r in [r for r in result.rows if r.system == "polybus" and r.x == size]:
            transport = str(r.config.get("transport", "tcp"))
            cpus = r.config.get("cpus", DEFAULT)
            suffix = "" if transport == "tcp" and cpus == DEFAULT else f" ({r.label})"
            family = "tcp" if transport == "tcp" else "unix"
            raw = result.find("raw_socket", size, METRIC, {"transport": family, "cpus": cpus})
            result.add_ratio(f"polybus/raw_socket {at}{suffix}", r, raw)
            result.add_ratio(f"polybus/memcpy {at}{suffix}", r, mem)


def run(quick: bool, progress: Progress) -> BenchResult:
    p = plan(quick)
    result = BenchResult("bandwidth", {"sizes": p.sizes, "reps": p.reps},
                         x_label="array bytes")
    result.params["placements"] = list(p.placements)
    result.notes.append(PLACEMENT_NOTE)
    progress.begin((3 * len(p.placements) + 1) * len(p.sizes) + 2 * len(p.placements) + 3,
                   "bandwidth")
    peer_rows(result, quick, progress)
    optional_peers.bandwidth(result, p, quick, progress)  # mpi4py, pyzmq, ray, dask
    result.rows.extend(polybus_rows(quick, result))
    progress.advance("bandwidth polybus")
    add_ratios(result)
    optional_peers.bandwidth_ratios(result)
    return result
