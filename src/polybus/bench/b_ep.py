"""ep: seeds/004 Fig. 4 — a 1024x1024 multiply handed out on demand, by watermark.

One task per (row block of A) x (column block of B), ``async-demand(4)`` per replica (the
configuration's watermark), and over ``shm`` also with watermarks 1 (seeds/004's own:
a task per worker at a time) and 2: the configuration change seeds/004 studied,
measured in the same run. Each also with stateful servers (programs/matmul_stateful.toml:
``cache = ["rows", "cols"]``): a row block of A or column block of B goes to a replica
once, not with each of the 8 tasks that use it; the module is the same.

Peers, on the same tasks: the one-process block loop (the speedup baseline),
ProcessPoolExecutor and, when importable, an mpi4py master/worker (skipped with its
reason otherwise). Each repeats inside one start-up, and the full run does it in
``ROUNDS`` interleaved rounds. Every system multiplies the same fresh matrices in each
repetition, after ``WARMUP`` untimed products of its own, as matmul's systems do (a
system's first product pays one-off costs). BLAS is pinned to one thread.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from polybus.bench import peer_rows  # the mpi4py master/worker, same tasks
from polybus.bench.b_matmul import WARMUP, _matrices, _order, pin_blas
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import summarize
from polybus.plural import plural

__all__ = ["run"]

# The configuration's (programs/matmul.toml): calls in flight per replica. 4, not 2:
# with 2 workers over shm it took less time than 2 in five of six interleaved runs of
# this benchmark here (polybus/mpi4py 0.86-1.22, median 1.07, against 0.94-1.36, median
# 1.14); with 1 worker the two were alike (0.92-1.18 against 0.85-1.00).
WATERMARK = 4
# programs/matmul_stateful.toml's: with the blocks cached a task costs the client little
# to send, and 8 in flight keep a replica fed while the client waits for a CPU. Over shm
# with 2 workers it took less time than 4 in 8 of 9 interleaved rounds here, the ninth
# a tie (medians of two sets: 38.2 and 40.7 ms against 40.5 and 43.1).
STATEFUL_WATERMARK = 8
_CONFIGURED = {"stateless": WATERMARK, "stateful": STATEFUL_WATERMARK}
# (transport, watermark, mode) of the polybus runs: the configuration's on each transport,
# stateful (blocks cached) and stateless (every task carries its blocks, as mpi4py's
# master/worker sends them), and over shm the watermarks below it (1: mpi4py's own).
_RUNS = [("tcp", STATEFUL_WATERMARK, "stateful"), ("shm", STATEFUL_WATERMARK, "stateful"),
         ("tcp", WATERMARK, "stateless"), ("shm", WATERMARK, "stateless"),
         ("shm", 1, "stateless"), ("shm", 2, "stateless")]
_PROGRAM = {"stateless": "matmul.toml", "stateful": "matmul_stateful.toml"}
# Rounds of the full run, interleaved: each runs every system once, so a drift in this
# machine's speed from minute to minute (the one-process loop took 42-54 ms in one
# sitting here) falls on every system alike rather than on whichever ran last. Each
# system's row pools the repetitions of all rounds.
ROUNDS = 3
REPS = 7  # timed repetitions per system per round (inside one start-up)


def _one_process(n: int, block: int, reps: int) -> list[float]:
    """The block tasks looped here: ``reps`` timed products after WARMUP untimed ones,
    each with the matrices every system draws for that repetition (`_matrices`)."""
    out = []
    for rep in _order(reps, WARMUP):
        a, b = _matrices(n, rep)
        c = np.empty((n, n))
        t0 = time.perf_counter()
        for i in range(0, n, block):
            for j in range(0, n, block):
                c[i:i + block, j:j + block] = a[i:i + block] @ b[:, j:j + block]
        if rep < reps:
            out.append(time.perf_counter() - t0)
    return out


def _block(rows: Any, cols: Any) -> Any:
    return rows @ cols


def _pool(n: int, block: int, workers: int, reps: int) -> list[float]:
    """The same tasks over ProcessPoolExecutor, all submitted at once (its docs' way)."""
    out = []
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(abs, range(workers)))  # started before timing
        for rep in _order(reps, WARMUP):
            a, b = _matrices(n, rep)
            t0 = time.perf_counter()
            futs = {(i, j): pool.submit(_block, a[i:i + block], b[:, j:j + block])
                    for i in range(0, n, block) for j in range(0, n, block)}
            c = np.empty((n, n))
            for (i, j), f in futs.items():
                c[i:i + block, j:j + block] = f.result()
            if rep < reps:
                out.append(time.perf_counter() - t0)
    return out


def _polybus_times(n: int, block: int, k: int, reps: int, transport: str,
                   watermark: int, mode: str = "stateless") -> tuple[list[float], bool, float]:
    """One polybus run of the ep tasks: each repetition's seconds, whether every
    product was right, and the client's bytes sent per product."""
    from polybus.bench.polybus_runs import PROGRAMS
    from polybus.runner import run as prun

    style = f"async-demand({watermark})"
    sets = [f"modules.server.replication={k}", "modules.client.entrypoint=blocks",
            f"modules.client.args={json.dumps([n, block, 1, reps, WARMUP])}",
            f'modules.client.use.multiply_block={{callstyle="{style}"}}']
    if transport != "tcp":
        sets.append(f"modules.server.transport={transport}")
    out = prun(PROGRAMS / _PROGRAM[mode], sets)
    return ([float(s) for s in out.result["seconds"]], bool(out.result["correct"]),
            out.bytes_sent / (reps + WARMUP))  # (every product sends the same)


def run(quick: bool, progress: Progress) -> BenchResult:
    pin_blas()
    cpus = os.cpu_count() or 1
    n = 512 if quick else 1024
    block = 128
    # (--quick proves the run works: 2 workers, every system's rows and ratios; one
    # worker is the same code with one replica, and mpi4py over TCP the same program as
    # over shared memory: leave_out_mpi_tcp)
    workers = [2] if quick else [w for w in (1, 2, 4) if w <= max(cpus, 2)]
    reps = 1 if quick else REPS
    rounds = 1 if quick else ROUNDS
    result = BenchResult("ep", {"n": n, "block": block, "tasks": (n // block) ** 2,
                                "reps": reps, "warmup": WARMUP, "rounds": rounds,
                                "blas_threads": 1},
                         x_label="workers")
    result.baselines["speedup"] = ("one_process (the same block tasks looped in one process; "
                                   "its seconds / polybus's)")
    if quick:
        peer_rows.leave_out_mpi_tcp(result)
    result.notes.append(f"{plural(rounds, 'round')}, interleaved: each round runs every system "
                        f"once ({plural(reps, 'repetition')} inside one start-up each); a row is the "
                        "median of all its rounds' repetitions")
    progress.begin(rounds * (1 + (len(_RUNS) + 1 + len(peer_rows.MPI_TRANSPORTS)) * len(workers)), "ep")
    base: list[float] = []
    mine: dict[tuple[int, str, int, str], list[float]] = {}
    bytes_sent: dict[tuple[int, str, int, str], list[float]] = {}  # per product, each round
    pool: dict[int, list[float]] = {}
    theirs: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        at = f" (round {r + 1} of {rounds})" if rounds > 1 else ""
        base += _one_process(n, block, max(reps, 3))
        progress.advance(f"ep one process{at}")
        for k in workers:
            # tcp, and shm (the host's shared memory, as mpi4py uses)
            for transport, watermark, mode in _RUNS:
                times, ok, sent = _polybus_times(n, block, k, reps, transport, watermark, mode)
                bytes_sent.setdefault((k, transport, watermark, mode), []).append(sent)
                what = f"{transport} async-demand({watermark}) {mode}"
                if not ok:
                    result.notes.append(f"polybus {what} workers={k}: WRONG RESULT")
                mine.setdefault((k, transport, watermark, mode), []).extend(times)
                progress.advance(f"ep polybus {what} workers={k}{at}")
            pool.setdefault(k, []).extend(_pool(n, block, k, reps))
            progress.advance(f"ep process_pool workers={k}{at}")
            for transport in peer_rows.MPI_TRANSPORTS:
                got = peer_rows.ep_times(result, n, block, k, reps, transport, WARMUP)
                if got is not None:
                    theirs.setdefault((transport, k), []).extend(got)
                progress.advance(f"ep mpi4py {transport} workers={k}{at}")
    one = summarize(base)
    result.add(Row.of("one_process", {}, 1, "seconds", one))
    for (k, transport, watermark, mode), times in mine.items():
        st = summarize(times)
        cfg = {"callstyle": f"async-demand({watermark})", "transport": transport, "mode": mode}
        result.add(Row.of("polybus", cfg, k, "seconds", st))
        result.add(Row.of("polybus", cfg, k, "speedup", st.map(lambda t: one.median / t)))
        result.add(Row.of("polybus", cfg, k, "bytes_sent",
                          summarize(bytes_sent[k, transport, watermark, mode])))
    for k, times in pool.items():
        result.add(Row.of("process_pool", {}, k, "seconds", summarize(times)))
    peer_rows.ep_rows(result, theirs)
    _ratios(result, workers)
    return result


def _ratios(result: BenchResult, workers: list[int]) -> None:
    for k in workers:
        for transport, watermark, mode in _RUNS:
            style = f"async-demand({watermark})"
            mine = result.find("polybus", k, "seconds",
                               {"transport": transport, "callstyle": style, "mode": mode})
            at = f"seconds, {k} workers (polybus {transport} {mode}" + (
                ")" if watermark == _CONFIGURED[mode] else f", {style})")
            result.add_ratio(f"one_process / polybus {at}",
                             result.find("one_process", 1, "seconds"), mine)
            peer_rows.mpi_ratios(result, at, mine, transport, k, {})
            result.add_ratio(f"polybus/process_pool {at}", mine,
                             result.find("process_pool", k, "seconds"))
