"""The mpi4py peer programs, run under ``mpiexec`` (``python -m`` this module NAME JSON).

Written the way mpi4py's docs recommend for arrays: buffer ``Send``/``Recv`` of numpy
arrays (no pickling), preallocated receive buffers, ``Bcast`` for an operand every
worker needs. Master/worker programs use rank 0 as the master handing out one task at a
time on demand (a worker gets its next task when its answer arrives), as a programmer
would write it; the SPMD sort scatters from rank 0, every rank sorts its part, rank 0
gathers and merges (seeds/000). Rank 0 prints one JSON line with per-repetition figures.
"""

from __future__ import annotations

import heapq
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

TASK, STOP = 1, 2


def _pin(cpus: list[int]) -> None:
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cpus))


def latency(comm: Any, sizes: list[int], reps: int, iters: list[int],
            cpus: list[list[int]]) -> dict[str, Any]:
    """Ping-pong between ranks 0 and 1: each repetition the mean round trip of ``iters``."""
    rank = comm.Get_rank()
    _pin(cpus[rank] if cpus else [])
    out: list[list[float]] = []
    for size, k in zip(sizes, iters, strict=True):
        buf = np.zeros(max(size, 0), dtype=np.uint8)
        per: list[float] = []
        for rep in range(reps + 1):  # the first is an untimed warm-up
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                if rank == 0:
                    comm.Send(buf, dest=1)
                    comm.Recv(buf, source=1)
                else:
                    comm.Recv(buf, source=0)
                    comm.Send(buf, dest=0)
            if rep:
                per.append((time.perf_counter() - t0) / k * 1e6)
        out.append(per)
    return {"rtt_us": out}


def bandwidth(comm: Any, sizes: list[int], reps: int, cpus: list[list[int]]) -> dict[str, Any]:
    """One-way Send of a ``size``-byte array into a preallocated buffer, one-byte ack."""
    rank = comm.Get_rank()
    _pin(cpus[rank] if cpus else [])
    ack = np.zeros(1, dtype=np.uint8)
    out: list[list[float]] = []
    for size in sizes:
        buf = np.full(size, 7 if rank == 0 else 0, dtype=np.uint8)
        per: list[float] = []
        for rep in range(reps + 1):
            comm.Barrier()
            t0 = time.perf_counter()
            if rank == 0:
                comm.Send(buf, dest=1)
                comm.Recv(ack, source=1)
            else:
                comm.Recv(buf, source=0)
                comm.Send(ack, dest=0)
            if rep:
                per.append(size / (time.perf_counter() - t0) / 1e9)
        out.append(per)
        del buf
    return {"gbps": out}


def _master(comm: Any, tasks: Iterator[Any], send: Callable[[int, Any], None],
            result_buf: Callable[[], Any], take: Callable[[Any, Any], None]) -> None:
    """Hand out ``tasks`` one at a time on demand; ``take(task, answer)`` each answer."""
    from mpi4py import MPI

    status = MPI.Status()
    assigned: dict[int, Any] = {}
    for w in range(1, comm.Get_size()):
        task = next(tasks, None)
        if task is None:
            break
        assigned[w] = task
        send(w, task)
    while assigned:
        comm.Probe(source=MPI.ANY_SOURCE, tag=TASK, status=status)
        src = status.Get_source()
        buf = result_buf()
        comm.Recv(buf, source=src, tag=TASK)
        take(assigned.pop(src), buf)
        task = next(tasks, None)
        if task is not None:
            assigned[src] = task
            send(src, task)


def _stop_workers(comm: Any) -> None:
    for w in range(1, comm.Get_size()):
        comm.Send(np.zeros(2, dtype=np.int64), dest=w, tag=STOP)


def _worker(comm: Any, serve: Callable[[Any], None]) -> None:
    """Receive a task header (tag TASK) and serve it, until a STOP header."""
    from mpi4py import MPI

    status = MPI.Status()
    hdr = np.zeros(2, dtype=np.int64)
    while True:
        comm.Recv(hdr, source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            return
        serve(hdr)


def throughput(comm: Any, calls: int, reps: int) -> dict[str, Any]:
    """No-op tasks (an int64 in, the same out), one outstanding per worker, calls/s."""
    one = np.zeros(2, dtype=np.int64)
    if comm.Get_rank():
        _worker(comm, lambda hdr: comm.Send(hdr, dest=0, tag=TASK))
        return {}
    ans = np.empty(2, dtype=np.int64)
    rates: list[float] = []
    for rep in range(reps + 1):
        def send(w: int, i: int) -> None:
            one[0] = i
            comm.Send(one, dest=w, tag=TASK)
        t0 = time.perf_counter()
        _master(comm, iter(range(calls)), send, lambda: ans, lambda task, got: None)
        if rep:
            rates.append(calls / (time.perf_counter() - t0))
    _stop_workers(comm)
    return {"calls_per_s": rates}


def sort(comm: Any, n: int, algorithm: str, reps: int, server: str,
         warmup: int = 0) -> dict[str, Any]:
    """seeds/000: rank 0 scatters one part per rank, every rank sorts its part with the
    same pure-Python function as the polybus server module, rank 0 gathers and merges;
    ``reps`` timed sorts after ``warmup`` untimed ones."""
    from polybus.worker.module import load_module

    mod = load_module(Path(server), "polybus_bench_mpi_sort_server")
    fn = mod.insertion_sort if algorithm == "insertion" else mod.quicksort
    rank, size = comm.Get_rank(), comm.Get_size()
    counts = [len(c) for c in np.array_split(np.arange(n), size)]
    displs = [sum(counts[:i]) for i in range(size)]
    secs: list[float] = []
    ok = True
    for i in range(warmup + reps):
        comm.Barrier()
        t0 = time.perf_counter()
        data = np.random.default_rng(0).integers(0, 1_000_000, size=n) if rank == 0 else None
        part = np.empty(counts[rank], dtype=np.int64)
        comm.Scatterv([data, counts, displs, _mpi_type("int64")] if rank == 0 else None, part,
                      root=0)
        mine = np.ascontiguousarray(fn(part), dtype=np.int64)
        whole = np.empty(n, dtype=np.int64) if rank == 0 else None
        comm.Gatherv(mine, [whole, counts, displs, _mpi_type("int64")] if rank == 0 else None,
                      root=0)
        if rank == 0:
            assert whole is not None and data is not None
            parts = [whole[d:d + c] for d, c in zip(displs, counts, strict=True)]
            merged = np.asarray(list(heapq.merge(*(p.tolist() for p in parts))))
            ok = ok and bool(np.array_equal(merged, np.sort(data)))
            if i >= warmup:
                secs.append(time.perf_counter() - t0)
    return {"seconds": secs, "correct": ok}


def _mpi_type(name: str) -> Any:
    from mpi4py import MPI

    return {"int64": MPI.INT64_T}[name]


def matmul(comm: Any, n: int, stateful: bool, reps: int, chunk: int = 1,
           warmup: int = 0) -> dict[str, Any]:
    """seeds/002: C = A B, one task per block of ``chunk`` rows of A, handed out on demand;
    stateless sends B with every task, stateful broadcasts B once per repetition (inside
    the timed part, as polybus sends it once). Each repetition has fresh matrices;
    ``warmup`` untimed ones (matrices of their own) come first, as b_matmul's do."""
    rank = comm.Get_rank()
    bw: Any = np.empty((n, n))
    rows = np.empty((chunk, n))
    c, hdr = np.empty((n, n) if rank == 0 else 0), np.zeros(2, dtype=np.int64)
    secs: list[float] = []
    ok = True
    for rep in [reps + w for w in range(warmup)] + list(range(reps)):
        rng = np.random.default_rng(1 + rep)
        a: Any = rng.random((n, n)) if rank == 0 else None
        b: Any = rng.random((n, n)) if rank == 0 else None
        comm.Barrier()
        t0 = time.perf_counter()
        if stateful:
            comm.Bcast(b if rank == 0 else bw, root=0)
        if rank:
            def serve(hdr: Any) -> None:
                part = rows[:int(hdr[1])]
                comm.Recv(part, source=0, tag=TASK)
                if not stateful:
                    comm.Recv(bw, source=0, tag=TASK)
                comm.Send(part @ bw, dest=0, tag=TASK)
            _worker(comm, serve)
            continue
        assert a is not None and b is not None

        def send(w: int, lo: int, a: Any = a, b: Any = b) -> None:
            hdr[:] = lo, min(chunk, n - lo)
            comm.Send(hdr, dest=w, tag=TASK)
            comm.Send(a[lo:lo + chunk], dest=w, tag=TASK)
            if not stateful:
                comm.Send(b, dest=w, tag=TASK)

        def take(lo: int, ans: Any) -> None:  # a short last block fills part of ans
            k = min(chunk, n - lo)
            c[lo:lo + k] = ans[:k]

        _master(comm, iter(range(0, n, chunk)), send, lambda: np.empty((chunk, n)), take)
        _stop_workers(comm)
        if rep < reps:
            secs.append(time.perf_counter() - t0)
        ok = ok and bool(np.allclose(c, a @ b))
    return {"seconds": secs, "correct": ok}


def ep(comm: Any, n: int, block: int, reps: int, warmup: int = 0) -> dict[str, Any]:
    """seeds/004: one task per (row block of A, column block of B), handed out on demand.
    Each repetition has fresh matrices; ``warmup`` untimed ones (matrices of their own)
    come first, as b_ep's other systems do."""
    rank = comm.Get_rank()
    rows, cols = np.empty((block, n)), np.empty((n, block))
    c, hdr = np.empty((n, n) if rank == 0 else 0), np.zeros(2, dtype=np.int64)
    secs: list[float] = []
    ok = True
    for rep in [reps + w for w in range(warmup)] + list(range(reps)):
        a: Any = None
        b: Any = None
        if rank == 0:
            rng = np.random.default_rng(1 + rep)
            a, b = rng.random((n, n)), rng.random((n, n))
        comm.Barrier()
        t0 = time.perf_counter()
        if rank:
            def serve(hdr: Any) -> None:
                comm.Recv(rows, source=0, tag=TASK)
                comm.Recv(cols, source=0, tag=TASK)
                comm.Send(rows @ cols, dest=0, tag=TASK)
            _worker(comm, serve)
            continue
        assert a is not None and b is not None

        def send(w: int, ij: tuple[int, int], a: Any = a, b: Any = b) -> None:
            hdr[:] = ij
            comm.Send(hdr, dest=w, tag=TASK)
            comm.Send(a[ij[0]:ij[0] + block], dest=w, tag=TASK)
            comm.Send(np.ascontiguousarray(b[:, ij[1]:ij[1] + block]), dest=w, tag=TASK)

        def take(ij: tuple[int, int], ans: Any) -> None:
            c[ij[0]:ij[0] + block, ij[1]:ij[1] + block] = ans

        tasks = iter([(i, j) for i in range(0, n, block) for j in range(0, n, block)])
        _master(comm, tasks, send, lambda: np.empty((block, block)), take)
        _stop_workers(comm)
        if rep < reps:
            secs.append(time.perf_counter() - t0)
        ok = ok and bool(np.allclose(c, a @ b))
    return {"seconds": secs, "correct": ok}


PROGRAMS: dict[str, Callable[..., dict[str, Any]]] = {
    "latency": latency, "bandwidth": bandwidth, "throughput": throughput, "sort": sort,
    "matmul": matmul, "ep": ep}


def main(argv: list[str]) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    name, args = argv[0], json.loads(argv[1])
    out = PROGRAMS[name](comm, *args)
    if comm.Get_rank() == 0:
        out["ranks"] = comm.Get_size()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
