"""ep: seeds/004 Fig. 4 — a 1024x1024 multiply handed out on demand, one task per
(row block of A) x (column block of B), ``async-demand(2)`` per replica.

Peers, on the same tasks: the one-process block loop (the speedup baseline),
ProcessPoolExecutor and, when importable, an mpi4py master/worker (skipped with its
reason otherwise). Each repeats inside one start-up. BLAS is pinned to one thread.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from polybus.bench.b_matmul import pin_blas
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import summarize

__all__ = ["run"]


def _one_process(n: int, block: int, reps: int) -> list[float]:
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n)), rng.random((n, n))
    out = []
    for _ in range(reps):
        c = np.empty((n, n))
        t0 = time.perf_counter()
        for i in range(0, n, block):
            for j in range(0, n, block):
                c[i:i + block, j:j + block] = a[i:i + block] @ b[:, j:j + block]
        out.append(time.perf_counter() - t0)
    return out


def _block(rows: Any, cols: Any) -> Any:
    return rows @ cols


def _pool(n: int, block: int, workers: int, reps: int) -> list[float]:
    """The same tasks over ProcessPoolExecutor, all submitted at once (its docs' way)."""
    out = []
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(abs, range(workers)))  # started before timing
        for rep in range(reps):
            rng = np.random.default_rng(1 + rep)
            a, b = rng.random((n, n)), rng.random((n, n))
            t0 = time.perf_counter()
            futs = {(i, j): pool.submit(_block, a[i:i + block], b[:, j:j + block])
                    for i in range(0, n, block) for j in range(0, n, block)}
            c = np.empty((n, n))
            for (i, j), f in futs.items():
                c[i:i + block, j:j + block] = f.result()
            out.append(time.perf_counter() - t0)
    return out


def run(quick: bool, progress: Progress) -> BenchResult:
    from polybus.bench.polybus_runs import PROGRAMS
    from polybus.runner import run as prun

    pin_blas()
    cpus = os.cpu_count() or 1
    n = 512 if quick else 1024
    block = 128
    workers = [1, 2] if quick else [w for w in (1, 2, 4) if w <= max(cpus, 2)]
    reps = 1 if quick else 5
    result = BenchResult("ep", {"n": n, "block": block, "tasks": (n // block) ** 2,
                                "reps": reps, "blas_threads": 1}, x_label="workers")
    progress.begin(1 + 5 * len(workers), "ep")
    base = summarize(_one_process(n, block, max(reps, 3)))
    result.add(Row.of("one_process", {}, 1, "seconds", base))
    progress.advance("ep one process")
    for k in workers:
        # All repetitions inside one run, as the one-process loop and mpi4py repeat
        # inside one start-up; tcp, and shm (the host's shared memory, as mpi4py uses).
        for transport in ("tcp", "shm"):
            sets = [f"modules.server.replication={k}", "modules.client.entrypoint=blocks",
                    f"modules.client.args={json.dumps([n, block, 1, reps])}"]
            if transport != "tcp":
                sets.append(f"modules.server.transport={transport}")
            out = prun(PROGRAMS / "matmul.toml", sets)
            if not out.result["correct"]:
                result.notes.append(f"polybus {transport} workers={k}: WRONG RESULT")
            st = summarize([float(s) for s in out.result["seconds"]])
            cfg = {"callstyle": "async-demand(2)", "transport": transport}
            result.add(Row.of("polybus", cfg, k, "seconds", st))
            result.add(Row.of("polybus", cfg, k, "speedup", st.map(lambda t: base.median / t)))
            progress.advance(f"ep polybus {transport} workers={k}")
        pool = summarize(_pool(n, block, k, reps))
        result.add(Row.of("process_pool", {}, k, "seconds", pool))
        progress.advance(f"ep process_pool workers={k}")
    from polybus.bench import peer_rows  # the mpi4py master/worker, same tasks

    peer_rows.ep(result, n, block, workers, reps, progress)
    for k in workers:
        for transport in ("tcp", "shm"):
            mine = result.find("polybus", k, "seconds", {"transport": transport})
            at = f"seconds, {k} workers (polybus {transport})"
            result.add_ratio(f"one_process / polybus {at}",
                             result.find("one_process", 1, "seconds"), mine)
            peer_rows.mpi_ratios(result, at, mine, transport, k, {})
            result.add_ratio(f"polybus/process_pool {at}", mine,
                             result.find("process_pool", k, "seconds"))
    return result
