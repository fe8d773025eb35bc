"""matmul: seeds/002 Appendix A-C — distributed C = A B, a block of rows of A per call.

The decomposition, the same for every system: C is computed ``chunk`` rows at a time,
one BLAS product ``A[lo:hi] @ B`` per task, with ``chunk = ceil(n / CALLS)`` (seeds/002
sent one row per call; blocks of rows let each task run BLAS on a block, as a row set
per server did there). Stateless servers get all of B with every block (bytes
O(N^2 * calls)); stateful ones keep B in their operand cache
(``define.multiply_rows.cache = ["b"]``; bytes O(N^2)). Same modules, the configuration
is the only switch. Beside them, the same tasks: the one-process loop over the same
blocks (the baseline of speedup), ProcessPoolExecutor and, when importable, an mpi4py
master/worker. Every system repeats inside one start-up (one polybus run, one pool,
one mpiexec), each repetition with fresh matrices, so a stateful server is sent each
repetition's B inside the timed part; one untimed warm-up repetition comes first in
each (``WARMUP``). BLAS is pinned to one thread per process. Server
counts above the machine's cores are modelled: each call sleeps the one-process time of
its block instead of computing it (BENCHMARKS.md), so those rows measure communication
and scheduling, not the kernel. At small n (``AGGREGATE_MAX_N``) one extra polybus row per
mode, labelled ``aggregate`` in its config, runs the same modules over shm with one
configuration change, the client's calls to a replica packed into one message; it has
ratios of its own, and the plain rows and theirs are kept as they are; so does one
labelled ``cpus`` (`_placed`: the client on one CPU, the servers on another). Last, the
speedup of record (stateful over shm, the largest size, 2 servers) is measured again
with one process and polybus back to back in each of several rounds (bench/_paired.py),
plain, with ``coalesce``, and with ``coalesce`` and each server on a CPU of its own.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from polybus.bench import peer_rows  # the mpi4py master/worker, same tasks
from polybus.bench._ceiling import ceiling_seconds
from polybus.bench._paired import ROUNDS, paired_speedup
from polybus.bench.peers.matmul_pool import pool_seconds
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Ratio, Row
from polybus.bench.stats import Stat, summarize
from polybus.config.cpus import can_pin
from polybus.engines.launchenv import set_loaded_blas_threads

__all__ = ["CALLS", "WARMUP", "chunk_of", "one_process_seconds", "pin_blas", "run"]

_BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
CALLS = 20  # tasks per product: enough to spread over 10 servers, blocks big enough for BLAS
# Untimed repetitions before the timed ones, for every system alike: the first product
# of a run pays one-off costs (a polybus run's first shared-memory segments faulted in,
# 60 ms against 30 for the next at n=1000; BLAS buffers, first page faults of C), which
# put one outlier in each system's median of a few repetitions.
WARMUP = 1
# Products of about a millisecond or less are repeated more: with 7 of them, a median
# was one scheduler hiccup away from another (three runs of the same code at n=10 gave
# polybus/mpi4py 1.9, 1.4 and 6.2 over shm on these VMs; at n=200, with 7, two runs
# 13 minutes apart gave stateful 2.08 and 3.38).
REPS_SMALL = {10: 201, 100: 51, 200: 31}


def reps_for(n: int, reps: int) -> int:
    """The timed repetitions at size ``n`` (``reps``, or more for small products)."""
    return max(reps, REPS_SMALL.get(n, 0)) if reps > 1 else reps


def pin_blas() -> None:
    """One BLAS thread in every process started from here on (workers inherit it), and
    in this one, whose BLAS was loaded (with its threads) before the variables were set:
    the one-process baseline runs here."""
    for v in _BLAS_VARS:
        os.environ[v] = "1"
    set_loaded_blas_threads(1)


def chunk_of(n: int) -> int:
    """Rows of A per task."""
    return max(1, -(-n // CALLS))


def _programs() -> Any:
    from polybus.bench.polybus_runs import PROGRAMS

    return PROGRAMS


def _matrices(n: int, rep: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(1 + rep)  # as the polybus and mpi4py clients make them
    return rng.random((n, n)), rng.random((n, n))


def _order(reps: int, warmup: int) -> list[int]:
    """Repetition numbers: ``warmup`` untimed ones first, with matrices of their own
    (after the timed ones' seeds, as the polybus client makes them), then the timed."""
    return [reps + w for w in range(warmup)] + list(range(reps))


def one_process_seconds(n: int, reps: int, chunk: int | None = None,
                        warmup: int = WARMUP) -> Stat:
    """The same tasks in one process: ``A[lo:hi] @ B`` block by block into C (with
    ``chunk=n``, the whole product as one BLAS call)."""
    step = chunk_of(n) if chunk is None else chunk
    times = []
    for rep in _order(reps, warmup):
        a, b = _matrices(n, rep)
        t0 = time.perf_counter()
        c = np.empty((n, n))
        for lo in range(0, n, step):
            c[lo:lo + step] = a[lo:lo + step] @ b
        if rep < reps:
            times.append(time.perf_counter() - t0)
    return summarize(times)


def polybus_run(n: int, servers: int, stateful: bool, cost: float, reps: int,
                transport: str = "tcp", warmup: int = WARMUP,
                aggregate: int | None = None,
                extra: Sequence[str] = ()) -> tuple[Stat, float, bool]:
    """One polybus run of ``reps`` products (after ``warmup`` untimed ones): their
    seconds, bytes sent per product, and whether every answer was right. ``aggregate``
    (a configuration change only): the client's calls to one replica travel ``aggregate``
    to a message (``use.multiply_rows.aggregate``). ``extra``: more overrides."""
    from polybus.runner import run as prun

    toml = _programs() / ("matmul_stateful.toml" if stateful else "matmul.toml")
    sets = [f"modules.server.replication={servers}", "modules.client.entrypoint=rows",
            f"modules.client.args={json.dumps([n, 1, cost, chunk_of(n), reps, warmup])}"]
    if transport != "tcp":
        sets.append(f"modules.server.transport={transport}")
    if aggregate is not None:
        sets.append("modules.client.use.multiply_rows="
                    f'{{callstyle="async", aggregate={aggregate}}}')
    out = prun(toml, [*sets, *extra])
    # (every product sends the same: fresh A, and a fresh B to each stateful server)
    return (summarize(out.result["seconds"]), out.bytes_sent / (reps + warmup),
            bool(out.result["correct"]))


def run(quick: bool, progress: Progress) -> BenchResult:
    pin_blas()
    cpus = os.cpu_count() or 1
    sizes = [100, 200] if quick else [10, 100, 200, 500, 1000]
    # (--quick proves the run works: 2 servers, each system's rows and ratios at both
    # sizes; one server is the same code with one replica, and mpi4py over TCP the
    # same program as over shared memory: leave_out_mpi_tcp. A machine of one core
    # keeps 1 and 2: the second is modelled there.)
    servers = ([2] if cpus >= 2 else [1, 2]) if quick else [1, 2, 4, 6, 8, 10]
    reps = 1 if quick else 7
    real = [s for s in servers if s <= cpus]
    result = BenchResult("matmul", {"sizes": sizes, "servers": servers, "reps": reps,
                                    "reps_by_size": {n: reps_for(n, reps) for n in sizes},
                                    "warmup": WARMUP,
                                    "calls": CALLS, "chunk": {n: chunk_of(n) for n in sizes},
                                    "blas_threads": 1, "cpus": cpus}, x_label="servers")
    result.baselines["speedup"] = ("one_process (the same row blocks looped in one process, "
                                   "same n; its seconds / each system's)")
    result.baselines["efficiency"] = "one_process, per server (speedup / servers)"
    if quick:
        peer_rows.leave_out_mpi_tcp(result)
    result.notes.append(f"every system runs the same tasks: C computed ceil(n/{CALLS}) rows "
                        "at a time (A[lo:hi] @ B, one BLAS call each); one_process is that "
                        "loop in one process, one_process kernel=A@B the whole product as "
                        "one call (for reference)")
    result.notes.append(f"each system runs {WARMUP} untimed repetition(s) with matrices of "
                        "their own before the timed ones (one-off costs of a run's first "
                        "product: first shared-memory segments, BLAS buffers, page faults)")
    result.notes.append("process_pool stateful: a pool cannot address one worker, so each "
                        "repetition's B goes to each worker as one task apiece, held at a "
                        "barrier until every worker has its own, inside the timed part as "
                        "polybus and mpi4py send it; the row labelled b='initializer, "
                        "untimed' gives one B to each worker by the pool's initializer "
                        "before the timing instead (sending B is then not in its time)")
    result.notes.append(f"server counts above {cpus} (the cores here) are modelled: each "
                        "call sleeps the one-process time of its block instead of computing")
    ceilings = [(n, k) for n in sizes if n >= CEILING_MIN_N for k in real if k > 1]
    if ceilings:
        result.notes.append("parallel_ceiling: the same tasks over k forked processes that "
                            "hold A and B before the clock starts and send nothing (round "
                            "robin's share each): the most k servers could gain on this "
                            "machine in this run (bench/_ceiling.py)")
    progress.begin(len(sizes) * (1 + 2 * (len(servers) + len(real) + 2) + 3 * min(len(real), 1)
                                 + 4 * len(real)) + len(ceilings) + 1, "matmul")
    for n in sizes:
        reps_n = reps_for(n, reps)
        base = one_process_seconds(n, max(reps_n, 3))
        result.add(Row.of("one_process", {"n": n}, 1, "seconds", base))
        whole = one_process_seconds(n, max(reps_n, 3), chunk=n)
        result.add(Row.of("one_process", {"n": n, "kernel": "A@B"}, 1, "seconds", whole))
        progress.advance(f"matmul one process n={n}")
        for k in [k for m, k in ceilings if m == n]:
            ceiling = ceiling_seconds(n, k, max(reps_n, 3), chunk_of(n), _matrices,
                                      _order(max(reps_n, 3), WARMUP))
            result.add(Row.of("parallel_ceiling", {"n": n}, k, "seconds", ceiling))
            progress.advance(f"matmul parallel ceiling n={n} processes={k}")
        per_call = base.median / -(-n // chunk_of(n))
        for stateful in (False, True):
            mode = "stateful" if stateful else "stateless"
            # tcp at every server count; shm (the same host's shared memory, as mpi4py
            # uses) where the servers are real
            for k, transport in [(k, "tcp") for k in servers] + [(k, "shm") for k in real]:
                modelled = k > cpus
                st, sent, ok = polybus_run(n, k, stateful, per_call if modelled else 0.0, reps_n,
                                           transport)
                if not ok:
                    result.notes.append(f"polybus {mode} {transport} n={n} servers={k}: "
                                        "WRONG RESULT")
                cfg: dict[str, str | int | bool] = {"n": n, "mode": mode, "transport": transport,
                                                    "modelled": modelled}
                result.add(Row.of("polybus", cfg, k, "seconds", st))
                speed = st.map(_over(base.median))
                result.add(Row.of("polybus", cfg, k, "speedup", speed))
                result.add(Row.of("polybus", cfg, k, "efficiency", speed.map(_per(k))))
                if transport == "tcp":  # (shm counts the same bytes: one column is enough)
                    result.add(Row.of("polybus", cfg, k, "bytes_sent", summarize([sent])))
                progress.advance(f"matmul polybus {mode} {transport} n={n} servers={k}")
            _aggregated_row(result, n, real[-1], stateful, reps_n, base.median)
            progress.advance(f"matmul polybus {mode} shm aggregated n={n}")
            _placed_row(result, n, stateful, reps_n, base.median)
            progress.advance(f"matmul polybus {mode} shm placed n={n}")
            for k in real[-1:]:
                for b_untimed in (False, True) if stateful else (False,):
                    st = pool_seconds(n, k, stateful, reps_n, b_untimed=b_untimed)
                    cfg2: dict[str, str | int | bool] = {"n": n, "mode": mode}
                    if b_untimed:
                        cfg2["b"] = "initializer, untimed"
                    result.add(Row.of("process_pool", cfg2, k, "seconds", st))
                    result.add(Row.of("process_pool", cfg2, k, "speedup",
                                      st.map(_over(base.median))))
                    progress.advance(f"matmul process_pool {mode} n={n} workers={k}")
        # mpi4py master/worker, same modes and tasks, measured right after polybus at
        # this size (not after every size: the machine's speed drifts over the run)
        peer_rows.matmul(result, [n], servers, lambda n: reps_for(n, reps), progress,
                         chunk_of, WARMUP)
    n, k = sizes[-1], min(2, cpus)  # the speedup of record again, in interleaved rounds

    def stateful_shm(*extra: str) -> Stat:
        return polybus_run(n, k, True, 0.0, reps_for(n, reps), "shm", extra=extra)[0]

    coalesce = f"modules.server.coalesce={COALESCE}"
    variants = {f"coalesce={COALESCE}": lambda: stateful_shm(coalesce)}
    if spread := _spread(k):  # (each server on a CPU of its own, and coalesce)
        variants[f"placed={SPREAD}, coalesce={COALESCE}"] = lambda: stateful_shm(
            coalesce, f"modules.server.cpus={spread}")
    paired_speedup(result, n, k, 1 if quick else ROUNDS,
                   lambda: one_process_seconds(n, reps_for(n, reps)), stateful_shm, variants)
    progress.advance(f"matmul one process and polybus stateful shm n={n}, interleaved")
    for n in sizes:
        _ratios(result, n, min(2, cpus))
    return result


# The speedup of record is measured with this ``coalesce`` too (worker/bells.py): with
# the client and both replicas on 2 CPUs, answers that wake the client once a replica's
# queue is empty leave the replicas' CPUs to them (at n <= 500 it costs: design.md).
COALESCE = "50ms"

# The parallel ceiling is timed for products at least this large (smaller ones take
# less than its start and done signals would blur).
CEILING_MIN_N = 500

# Small products only: above this the blocks are large and few per replica, and
# aggregation has little per-call cost left to save (at n=200 it still took 0.85x the
# stateful time, 1.26x -> 1.07x mpi4py's, once batches named cached operands).
AGGREGATE_MAX_N = 200


def _per_replica(n: int, k: int) -> int:
    """The calls each of ``k`` replicas gets per product (the aggregated row's batch)."""
    calls = math.ceil(n / chunk_of(n))
    return math.ceil(calls / k)


def _aggregated_row(result: BenchResult, n: int, k: int, stateful: bool, reps: int,
                    base: float) -> None:
    """An extra, labelled polybus row at small n: the same modules over shm on ``k``
    servers, with one configuration change, the client's calls to one replica packed
    into one message (``aggregate`` = the calls each replica gets per product). The
    plain rows and their ratios stay as they are; this row has its own."""
    if n > AGGREGATE_MAX_N:
        return
    per_replica = _per_replica(n, k)
    st, _, ok = polybus_run(n, k, stateful, 0.0, reps, "shm", aggregate=per_replica)
    _variant(result, n, k, stateful, st, ok, base, {"aggregate": per_replica})


# The placed row's CPUs (``cpus`` on each module, config/cpus.py): the client alone on
# the first CPU this process may run on, both replicas on the second. With three busy
# processes on two CPUs, a call then wakes its replica on the other CPU, and the two
# replicas take turns on theirs (docs/tuning.md, "Placement: `cpus`").
def _cpus_here() -> list[int]:
    """The CPUs this process may run on, in order ([] where nothing can be pinned)."""
    return sorted(os.sched_getaffinity(0)) if can_pin() else []


def _placed(cpus: list[int]) -> tuple[str, ...]:
    return (f"modules.client.cpus=[{cpus[0]}]", f"modules.server.cpus=[{cpus[1]}]")


def _placed_row(result: BenchResult, n: int, stateful: bool, reps: int, base: float) -> None:
    """An extra, labelled polybus row at small n on 2 CPUs or more: the same modules
    over shm on 2 servers, with one configuration change, `_placed`. Its own ratios."""
    cpus = _cpus_here()
    if n > AGGREGATE_MAX_N or len(cpus) < 2:
        return
    st, _, ok = polybus_run(n, 2, stateful, 0.0, reps, "shm", extra=_placed(cpus))
    _variant(result, n, 2, stateful, st, ok, base, {"cpus": PLACED})


PLACED = "client on one CPU, servers on another"  # (the label of `_placed`'s rows)
SPREAD = "each server on a CPU of its own"  # (`_spread`'s, in the speedup of record)


def _spread(k: int) -> str | None:
    """``cpus`` that puts server i alone on the i-th CPU this process may run on (the
    client free), for ``k`` servers; None with fewer CPUs than that."""
    cpus = _cpus_here()
    return None if len(cpus) < k else "[" + ",".join(f"[{c}]" for c in cpus[:k]) + "]"


def _variant(result: BenchResult, n: int, k: int, stateful: bool, st: Stat, ok: bool,
             base: float, label: dict[str, str | int]) -> None:
    """A polybus row over shm beside the plain ones, told apart by ``label`` (its
    configuration change): its seconds and speedup, and a note if an answer was wrong."""
    mode = "stateful" if stateful else "stateless"
    if not ok:
        said = " ".join(f"{k}={v}" for k, v in label.items())
        result.notes.append(f"polybus {mode} shm {said} n={n} servers={k}: WRONG RESULT")
    cfg: dict[str, str | int | bool] = {"n": n, "mode": mode, "transport": "shm",
                                        "modelled": False, **label}
    result.add(Row.of("polybus", cfg, k, "seconds", st))
    result.add(Row.of("polybus", cfg, k, "speedup", st.map(_over(base))))


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
    result.add_ratio(f"one_process / parallel_ceiling n={n} processes={k} (this machine's "
                     "most)", result.find("one_process", 1, "seconds", {"n": n}),
                     result.find("parallel_ceiling", k, "seconds", {"n": n}))
    full = result.find("polybus", k, "bytes_sent", {"n": n, "mode": "stateless"})
    state = result.find("polybus", k, "bytes_sent", {"n": n, "mode": "stateful"})
    if state is not None:
        result.ratios.append(Ratio(f"stateful bytes sent / minimum (A + B per server) n={n} "
                                   f"servers={k}", state.median / minimum))
    result.add_ratio(f"stateless / stateful bytes sent n={n} servers={k}", full, state)
    for tr in ("tcp", "shm"):
        for mode in ("stateful", "stateless"):
            mine = result.find("polybus", k, "seconds", {"n": n, "mode": mode, "transport": tr})
            at = f"{mode} seconds n={n} servers={k} (polybus {tr})"
            result.add_ratio(f"one_process (same tasks) / polybus {at}",
                             result.find("one_process", 1, "seconds", {"n": n}), mine)
            result.add_ratio(f"one_process (A@B whole) / polybus {at}",
                             result.find("one_process", 1, "seconds", {"n": n, "kernel": "A@B"}),
                             mine)
            result.add_ratio(f"polybus/process_pool {at}", mine,
                             result.find("process_pool", k, "seconds", {"n": n, "mode": mode}))
            result.add_ratio(f"polybus/process_pool b='initializer, untimed' {at}", mine,
                             result.find("process_pool", k, "seconds",
                                         {"n": n, "mode": mode, "b": "initializer, untimed"}))
            result.add_ratio(f"parallel_ceiling / polybus {at}",
                             result.find("parallel_ceiling", k, "seconds", {"n": n}), mine)
            peer_rows.mpi_ratios(result, at, mine, tr, k, {"n": n, "mode": mode})
    # the aggregated and placed rows' own, beside the plain
    for label in ({"aggregate": _per_replica(n, k)}, {"cpus": PLACED}):
        for mode in ("stateful", "stateless"):
            row = result.find("polybus", k, "seconds", {"n": n, "mode": mode, **label})
            if row is not None:
                said = " ".join(f"{a}={b}" for a, b in label.items())
                at = f"{mode} seconds n={n} servers={k} (polybus shm {said})"
                peer_rows.mpi_ratios(result, at, row, "shm", k, {"n": n, "mode": mode})
                result.add_ratio(f"polybus/process_pool {at}", row, result.find(
                    "process_pool", k, "seconds", {"n": n, "mode": mode}))
