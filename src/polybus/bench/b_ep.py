"""ep: seeds/004 Fig. 4 — a 1024x1024 multiply handed out on demand, one task per
(row block of A) x (column block of B), ``async-demand(2)`` per replica (the
configuration's watermark), and over ``shm`` also with watermarks 1 and 4: the
configuration change seeds/004 studied, measured in the same run.

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

WATERMARK = 2  # the configuration's (programs/matmul.toml): calls in flight per replica
# (transport, watermark) of the polybus runs: the configuration's on each transport, and
# over shm the watermarks around it (1: mpi4py's master/worker's own; 4: a deeper pipe).
_RUNS = [("tcp", WATERMARK), ("shm", WATERMARK), ("shm", 1), ("shm", 4)]


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
    reps = 1 if quick else 11
    result = BenchResult("ep", {"n": n, "block": block, "tasks": (n // block) ** 2,
                                "reps": reps, "blas_threads": 1}, x_label="workers")
    progress.begin(1 + (len(_RUNS) + 3) * len(workers), "ep")
    base = summarize(_one_process(n, block, max(reps, 3)))
    result.add(Row.of("one_process", {}, 1, "seconds", base))
    progress.advance("ep one process")
    for k in workers:
        # All repetitions inside one run, as the one-process loop and mpi4py repeat
        # inside one start-up; tcp, and shm (the host's shared memory, as mpi4py uses).
        for transport, watermark in _RUNS:
            style = f"async-demand({watermark})"
            sets = [f"modules.server.replication={k}", "modules.client.entrypoint=blocks",
                    f"modules.client.args={json.dumps([n, block, 1, reps])}",
                    f'modules.client.use.multiply_block={{callstyle="{style}"}}']
            if transport != "tcp":
                sets.append(f"modules.server.transport={transport}")
            out = prun(PROGRAMS / "matmul.toml", sets)
            if not out.result["correct"]:
                result.notes.append(f"polybus {transport} {style} workers={k}: WRONG RESULT")
            st = summarize([float(s) for s in out.result["seconds"]])
            cfg = {"callstyle": style, "transport": transport}
            result.add(Row.of("polybus", cfg, k, "seconds", st))
            result.add(Row.of("polybus", cfg, k, "speedup", st.map(lambda t: base.median / t)))
            progress.advance(f"ep polybus {transport} {style} workers={k}")
        pool = summarize(_pool(n, block, k, reps))
        result.add(Row.of("process_pool", {}, k, "seconds", pool))
        progress.advance(f"ep process_pool workers={k}")
    from polybus.bench import peer_rows  # the mpi4py master/worker, same tasks

    peer_rows.ep(result, n, block, workers, reps, progress)
    for k in workers:
        for transport, watermark in _RUNS:
            style = f"async-demand({watermark})"
            mine = result.find("polybus", k, "seconds", {"transport": transport, "callstyle": style})
            at = f"seconds, {k} workers (polybus {transport}" + (
                ")" if watermark == WATERMARK else f", {style})")
            result.add_ratio(f"one_process / polybus {at}",
                             result.find("one_process", 1, "seconds"), mine)
            peer_rows.mpi_ratios(result, at, mine, transport, k, {})
            result.add_ratio(f"polybus/process_pool {at}", mine,
                             result.find("process_pool", k, "seconds"))
    return result
