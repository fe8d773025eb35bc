"""ep: seeds/004 Fig. 4 — a 1024x1024 multiply handed out on demand, one task per
(row block of A) x (column block of B), ``async-demand(2)`` per replica.

Peers: the one-process block loop (the speedup baseline) and, when importable, an
mpi4py master/worker (skipped with its reason otherwise). BLAS is pinned to one thread.
"""

from __future__ import annotations

import json
import os
import time

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


def run(quick: bool, progress: Progress) -> BenchResult:
    from polybus.bench.polybus_runs import PROGRAMS
    from polybus.runner import run as prun

    pin_blas()
    cpus = os.cpu_count() or 1
    n = 512 if quick else 1024
    block = 128
    workers = [1, 2] if quick else [w for w in (1, 2, 4) if w <= max(cpus, 2)]
    reps = 1 if quick else 3
    result = BenchResult("ep", {"n": n, "block": block, "tasks": (n // block) ** 2,
                                "reps": reps, "blas_threads": 1}, x_label="workers")
    progress.begin(1 + 2 * len(workers), "ep")
    base = summarize(_one_process(n, block, max(reps, 3)))
    result.add(Row.of("one_process", {}, 1, "seconds", base))
    progress.advance("ep one process")
    for k in workers:
        secs = []
        for _ in range(reps):
            out = prun(PROGRAMS / "matmul.toml",
                       [f"modules.server.replication={k}", "modules.client.entrypoint=blocks",
                        f"modules.client.args={json.dumps([n, block])}"])
            if not out.result["correct"]:
                result.notes.append(f"polybus workers={k}: WRONG RESULT")
            secs.append(float(out.result["seconds"]))
        st = summarize(secs)
        cfg = {"callstyle": "async-demand(2)"}
        result.add(Row.of("polybus", cfg, k, "seconds", st))
        result.add(Row.of("polybus", cfg, k, "speedup", st.map(lambda t: base.median / t)))
        progress.advance(f"ep polybus workers={k}")
    result.add_ratio(f"one_process / polybus seconds, {workers[-1]} workers",
                     result.find("one_process", 1, "seconds"),
                     result.find("polybus", workers[-1], "seconds"))
    from polybus.bench import peer_rows  # the mpi4py master/worker, same tasks

    peer_rows.ep(result, n, block, workers, reps, progress)
    return result
