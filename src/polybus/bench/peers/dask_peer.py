"""Dask distributed peer: submit latency, scatter bandwidth, map throughput.

Run in a driver child (``python -m`` this module KIND ARGS) so the cluster's worker
processes belong to that child's process group and are ended with it.
``LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
dashboard_address=None)``; written as Dask's docs recommend: ``client.submit`` for one
call, ``client.scatter`` to place a large operand on a worker, ``client.map`` for many.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from polybus.bench.peers import PeerUnavailable, why_unavailable
from polybus.bench.peers._driver import loopback_only_prefix, run_json
from polybus.bench.peers._proc import PYTHON, driver_figures, python_child_env
from polybus.bench.stats import Stat, seconds_each

__all__ = ["CONFIG", "measure"]

CONFIG: dict[str, str | int] = {"n_workers": 2, "threads_per_worker": 1, "cpus": "free"}


def echo(x: Any) -> Any:
    return x


def noop(x: int) -> int:
    return x


def _driver(kind: str, args: list[Any]) -> dict[str, Any]:
    import dask.distributed
    import numpy as np

    dd: Any = dask.distributed  # untyped calls; Any keeps mypy strict quiet here

    t0 = time.perf_counter()
    cluster = dd.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None)
    client = dd.Client(cluster)
    out: dict[str, Any] = {"startup_s": time.perf_counter() - t0}
    try:
        if kind == "latency":
            sizes, reps, iters = args
            client.submit(echo, b"", pure=False).result()
            res = []
            for size, k in zip(sizes, iters, strict=True):
                payload = bytes(size)

                def round_trips(k: int = k, payload: bytes = payload) -> None:
                    for _ in range(k):
                        client.submit(echo, payload, pure=False).result()

                res.append([s / k * 1e6 for s in seconds_each(round_trips, reps)])
            out["rtt_us"] = res
        elif kind == "bandwidth":
            sizes, reps = args
            worker = next(iter(client.scheduler_info()["workers"]))
            res = []
            for size in sizes:
                data = np.full(size, 7, dtype=np.uint8)
                per = []
                for rep in range(reps + 1):
                    t = time.perf_counter()
                    fut = client.scatter(data, workers=[worker], hash=False)
                    fut.result()  # a scattered future is done once the worker holds it
                    if rep:
                        per.append(size / (time.perf_counter() - t) / 1e9)
                    fut.release()
                res.append(per)
            out["gbps"] = res
        elif kind == "throughput":
            calls, reps = args
            out["calls_per_s"] = [calls / s for s in seconds_each(
                lambda: client.gather(client.map(noop, range(calls), pure=False)), reps)]
    finally:
        client.close()
        cluster.close()
    return out


def measure(kind: str, args: Sequence[Any], timeout: float = 900) -> tuple[list[Stat], float]:
    """Run one Dask driver for ``kind``: a Stat per size (or one), and cluster start-up (s)."""
    why = why_unavailable("dask")
    if why:
        raise PeerUnavailable(why)
    # host="127.0.0.1" keeps Dask on loopback; a private namespace, where allowed, too.
    out = run_json([*loopback_only_prefix(), PYTHON, "-m", "polybus.bench.peers.dask_peer", kind,
                    json.dumps(list(args))], f"dask {kind}", timeout, env=python_child_env())
    return driver_figures(out, kind)


if __name__ == "__main__":
    # Imported by name so the workers can unpickle echo/noop (not as __main__).
    from polybus.bench.peers import dask_peer

    sys.stdout.write(json.dumps(dask_peer._driver(sys.argv[1], json.loads(sys.argv[2])))
                     + "\n")
    sys.stdout.flush()
