"""bench bandwidth's peer ratios name the transport on both sides, as latency's do.

pyzmq runs over TCP alone and mpi4py over its shared memory: a ratio of polybus over
`ipc` or `shm` against pyzmq was named for polybus's transport only, so it read as like
for like (no processes here: rows are made up, and only the ratios' names are checked).
"""

from __future__ import annotations

from polybus.bench import peer_rows
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat

MB = 1_000_000


def _result() -> BenchResult:
    result = BenchResult("bandwidth")
    stat = Stat(2.0, 1.0, 3.0, 3)
    for transport in ("tcp", "ipc", "shm"):
        result.add(Row.of("polybus", {"transport": transport, "cpus": "split"}, MB, "gbps",
                          stat))
    result.add(Row.of("mpi4py", {"transport": "sm", "cpus": "split"}, MB, "gbps", stat))
    result.add(Row.of("pyzmq", {"transport": "tcp", "cpus": "split"}, MB, "gbps", stat))
    return result


def test_each_peer_ratio_names_the_peers_transport() -> None:
    result = _result()
    peer_rows.bandwidth_ratios(result)
    names = [r.name for r in result.ratios]
    assert names == [
        "polybus/mpi4py GB/s at 1 MB (polybus transport=tcp,cpus=split vs mpi4py sm)",
        "polybus/pyzmq GB/s at 1 MB (polybus transport=tcp,cpus=split vs pyzmq tcp)",
        "polybus/mpi4py GB/s at 1 MB (polybus transport=ipc,cpus=split vs mpi4py sm)",
        "polybus/pyzmq GB/s at 1 MB (polybus transport=ipc,cpus=split vs pyzmq tcp)",
        "polybus/mpi4py GB/s at 1 MB (polybus transport=shm,cpus=split vs mpi4py sm)",
        "polybus/pyzmq GB/s at 1 MB (polybus transport=shm,cpus=split vs pyzmq tcp)"]
