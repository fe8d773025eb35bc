"""matmul: seeds/002 Appendix A-C — distributed C = A B, one row of A per call.

Stateless servers get all of B with every row (bytes O(N^3)); stateful ones keep B in
their operand cache (``define.multiply_row.cache = ["b"]``; bytes O(N^2)). Same modules,
the configuration is the only switch. Beside them: the same program over
ProcessPoolExecutor (B with every task, or B given once per worker by an initializer),
mpi4py when importable, and the one-process row loop (the baseline of speedup).
BLAS is pinned to one thread per process. Server counts above the machine's cores are
modelled: each call sleeps the one-process time of one row instead of computing it
(BENCHMARKS.md), so those rows measure communication and scheduling, not the kernel.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat, summarize

__all__ = ["one_process_seconds", "pin_blas", "run"]

_BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_B: Any = None


def pin_blas() -> None:
    """One BLAS thread in every process started from here on (workers inherit it)."""
    for v in _BLAS_VARS:
        os.environ[v] = "1"


def _programs() -> Any:
    from polybus.bench.polybus_runs import PROGRAMS

    return PROGRAMS


def one_process_seconds(n: int, reps: int) -> Stat:
    """The same row kernel in one process, one row at a time."""
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n)), rng.random((n, n))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.vstack([a[i] @ b for i in range(n)])
        times.append(time.perf_counter() - t0)
    return summarize(times)


def _row_with_b(row: Any, b: Any) -> Any:
    return row @ b


def _set_b(b: Any) -> None:
    global _B
    _B = b


def _row_cached(row: Any) -> Any:
    return row @ _B


def pool_seconds(n: int, workers: int, stateful: bool, reps: int) -> Stat:
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n)), rng.random((n, n))
    times = []
    kw: dict[str, Any] = {"initializer": _set_b, "initargs": (b,)} if stateful else {}
    with ProcessPoolExecutor(workers, **kw) as pool:
        list(pool.map(abs, range(workers)))  # started before timing
        for _ in range(reps):
            t0 = time.perf_counter()
            if stateful:
                futs = [pool.submit(_row_cached, a[i]) for i in range(n)]
            else:
                futs = [pool.submit(_row_with_b, a[i], b) for i in range(n)]
            np.vstack([f.result() for f in futs])
            times.append(time.perf_counter() - t0)
    return summarize(times)


def polybus_run(n: int, servers: int, stateful: bool, cost: float) -> tuple[float, int, bool]:
    from polybus.runner import run as prun

    toml = _programs() / ("matmul_stateful.toml" if stateful else "matmul.toml")
    out = prun(toml, [f"modules.server.replication={servers}",
                      "modules.client.entrypoint=rows",
                      f"modules.client.args={json.dumps([n, 1, cost])}"])
    return float(out.result["seconds"]), out.bytes_sent, bool(out.result["correct"])


def run(quick: bool, progress: Progress) -> BenchResult:
    pin_blas()
    cpus = os.cpu_count() or 1
    sizes = [100, 200] if quick else [10, 100, 200, 500, 1000]
    servers = [1, 2] if quick else [1, 2, 4, 6, 8, 10]
    reps = 1 if quick else 3
    result = BenchResult("matmul", {"sizes": sizes, "servers": servers, "reps": reps,
                                    "blas_threads": 1, "cpus": cpus}, x_label="servers")
    result.notes.append(f"server counts above {cpus} (the cores here) are modelled: each "
                        "call sleeps the one-process time of one row instead of computing")
    progress.begin(len(sizes) * (1 + 2 * len(servers) + 2 + 2 * min(len(servers), cpus)),
                   "matmul")
    for n in sizes:
        base = one_process_seconds(n, max(reps, 3))
        result.add(Row.of("one_process", {"n": n}, 1, "seconds", base))
        per_row = base.median / n
        for stateful in (False, True):
            mode = "stateful" if stateful else "stateless"
            for k in servers:
                modelled = k > cpus
                cost = per_row if modelled else 0.0
                secs, sent, ok = [], [], True
                for _ in range(reps):
                    s, b, good = polybus_run(n, k, stateful, cost)
                    secs.append(s)
                    sent.append(float(b))
                    ok = ok and good
                if not ok:
                    result.notes.append(f"polybus {mode} n={n} servers={k}: WRONG RESULT")
                cfg: dict[str, str | int | bool] = {"n": n, "mode": mode, "modelled": modelled}
                st = summarize(secs)
                result.add(Row.of("polybus", cfg, k, "seconds", st))
                speed = st.map(_over(base.median))
                result.add(Row.of("polybus", cfg, k, "speedup", speed))
                result.add(Row.of("polybus", cfg, k, "efficiency", speed.map(_per(k))))
                result.add(Row.of("polybus", cfg, k, "bytes_sent", summarize(sent)))
                progress.advance(f"matmul polybus {mode} n={n} servers={k}")
            for k in [s for s in servers if s <= cpus][-1:]:
                st = pool_seconds(n, k, stateful, reps)
                cfg2: dict[str, str | int | bool] = {"n": n, "mode": mode}
                result.add(Row.of("process_pool", cfg2, k, "seconds", st))
                result.add(Row.of("process_pool", cfg2, k, "speedup",
                                  st.map(_over(base.median))))
                progress.advance(f"matmul process_pool {mode} n={n} workers={k}")
        big = max(sizes)
        if n == big:
            _ratios(result, n, min(2, cpus))
    from polybus.bench import peer_rows  # mpi4py master/worker, same sizes and modes

    peer_rows.matmul(result, sizes, servers, reps, progress)
    return result


def _over(b0: float) -> Any:
    def f(t: float) -> float:
        return b0 / t
    return f


def _per(k: int) -> Any:
    def f(s: float) -> float:
        return s / k
    return f


def _ratios(result: BenchResult, n: int, k: int) -> None:
    minimum = 8 * n * n * (1 + k)  # A once and B once per server, 8-byte floats
    full = result.find("polybus", k, "bytes_sent", {"n": n, "mode": "stateless"})
    state = result.find("polybus", k, "bytes_sent", {"n": n, "mode": "stateful"})
    if state is not None:
        result.ratios.append(_ratio(f"stateful bytes sent / minimum (A + B per server) n={n} "
                                    f"servers={k}", state.median / minimum))
    result.add_ratio(f"stateless / stateful bytes sent n={n} servers={k}", full, state)
    result.add_ratio(f"one_process / polybus stateful seconds n={n} servers={k}",
                     result.find("one_process", 1, "seconds", {"n": n}),
                     result.find("polybus", k, "seconds", {"n": n, "mode": "stateful"}))
    result.add_ratio(f"process_pool stateful / polybus stateful seconds n={n} servers={k}",
                     result.find("process_pool", k, "seconds", {"n": n, "mode": "stateful"}),
                     result.find("polybus", k, "seconds", {"n": n, "mode": "stateful"}))


def _ratio(name: str, value: float) -> Any:
    from polybus.bench.report import Ratio

    return Ratio(name, value)

