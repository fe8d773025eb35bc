"""sort (seeds/000 Tables 1-4): distributed insertion sort and quicksort, client merges.

The client splits an array of n integers into one part per worker, the workers sort
their parts at the same time, the client merges (examples/sort). Rows:

- ``polybus`` ``model=real``: examples/sort run by ``polybus.run`` with ``replication``
  = workers, for the worker counts this machine has cores for;
- ``polybus`` ``model=sleep``: beyond the cores, each part's sort is measured here in
  one process and a worker sleeps that long before sorting (BENCHMARKS.md: scaling
  beyond the cores is modelled as time, never claimed); split, transfer, merge are real;
- ``one_process``: the same sort function on the whole array in this process;
- ``mpi4py``: the same program under mpiexec, when mpi4py can run here.

x is the number of elements; speedup is one_process time / polybus time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from polybus.bench import peer_rows as optional_peers
from polybus.bench.exampledirs import example
from polybus.bench.peers import why_unavailable
from polybus.bench.polybus_runs import PROGRAMS
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat, repeat, time_repeat

__all__ = ["EXAMPLE", "Plan", "plan", "run"]

EXAMPLE = example("sort")
ALGORITHMS = {"insertion": "insertion_sort", "quicksort": "quicksort"}


class Plan:
    def __init__(self, quick: bool) -> None:
        # Pure-Python insertion sort is O(n^2): 2^14 elements already take seconds.
        # (--quick: one size of insertion sort, every cell still repeated; it proves the
        # run works. Quicksort is the same path with another function: its 8 runs, each
        # starting 2 or 3 workers, were half the quick run.)
        self.sizes = ({"insertion": [2**10]} if quick else
                      {"insertion": [2**10, 2**12, 2**14],
                       "quicksort": [2**10, 2**14, 2**18, 2**20]})
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        # (--quick: 2 real workers, 1 on a machine of one core, and 3 modelled; one
        # worker beside 2 is the same code with one replica, and 3 modelled ones the same
        # as 4, with a worker fewer to start for each of a cell's runs.)
        workers = [min(2, max(cores, 1))] if quick else [1, 2, 4, 8, 16]
        self.real = [p for p in workers if p <= max(cores, 1)]
        self.modelled = [p for p in ([3] if quick else workers) if p not in self.real]
        # Every cell alike, the one_process baseline included, --quick too: a single cold
        # baseline run once made 2 workers look 1.5x faster than they were.
        self.reps = 3
        self.warmup = 1
        self.quick = quick

    def steps(self) -> int:
        """The progress steps `run` advances: one per cell, mpi4py's (peer_rows) too."""
        cells = sum(len(s) for s in self.sizes.values())
        return (cells * (1 + len(self.real) + len(self.modelled))
                + optional_peers.sort_steps(self.sizes, self.real, self.quick))


def plan(quick: bool) -> Plan:
    return Plan(quick)


def _data(n: int) -> Any:
    return np.random.default_rng(0).integers(0, 1_000_000, size=n)  # as examples/sort


def _sorters() -> dict[str, Callable[[Any], Any]]:
    from polybus.worker.module import load_module

    mod = load_module(EXAMPLE / "server.py", "polybus_bench_sort_server")
    return {a: getattr(mod, f) for a, f in ALGORITHMS.items()}


def _polybus(toml: Path, sets: list[str]) -> float:
    from polybus.runner import run

    out = run(toml, sets)
    if not out.result.get("correct"):
        raise AssertionError(f"sort answered wrongly under {sets}")
    return out.elapsed_s


def _speedup(one: Stat, pb: Stat) -> Stat:
    return Stat(one.median / pb.median, one.min / pb.max, one.max / pb.min, pb.n)


def run(quick: bool, progress: Progress) -> BenchResult:
    p = plan(quick)
    result = BenchResult("sort", {"sizes": p.sizes, "reps": p.reps, "warmup": p.warmup,
                                  "workers_real": p.real, "workers_modelled": p.modelled},
                         x_label="elements")
    result.baselines["speedup"] = ("one_process (the same elements sorted in one process, "
                                   "same algorithm; its seconds / polybus's)")
    progress.begin(p.steps(), "sort")
    if not (EXAMPLE / "app.toml").exists():
        result.skipped["polybus"] = f"examples/sort not found at {EXAMPLE}"
        return result
    sorters = _sorters()
    why = why_unavailable("mpi4py")
    if why:
        result.skipped["mpi4py"] = why
    if p.modelled:
        result.notes.append(f"workers {p.modelled}: more than this machine's cores; each "
                            "part's sort is measured in one process (median of the "
                            "repetitions) and modelled as that much sleep on its worker "
                            "(split, transfer and merge are real); mpi4py runs only where "
                            "polybus's rows are real (its ranks cannot be modelled so)")
    result.notes.append("polybus times include the client's split, merge and numpy check; "
                        "one_process is the sort alone")
    result.notes.append(f"every cell, one_process included: {p.warmup} untimed run(s), then "
                        f"the median of {p.reps}")

    def timed(toml: Path, sets: list[str]) -> Stat:
        return repeat(partial(_polybus, toml, sets), p.reps, p.warmup)

    def real_run(algo: str, n: int, workers: int) -> Stat:
        return timed(EXAMPLE / "app.toml", [f"modules.server.replication={workers}",
                                            f'modules.client.args=[{n}, {workers}, "{algo}"]'])

    for algo, sizes in p.sizes.items():
        sort = sorters[algo]
        for n in sizes:
            data = _data(n)
            one = time_repeat(partial(sort, data), p.reps, p.warmup)
            result.add(Row.of("one_process", {"algorithm": algo}, n, "seconds", one))
            progress.advance(f"sort one_process {algo} {n}")
            for workers in [*p.real, *p.modelled]:
                if workers in p.real:
                    st = real_run(algo, n, workers)
                else:
                    costs = [time_repeat(partial(sort, c), p.reps, p.warmup).median
                             for c in np.array_split(data, workers)]
                    st = timed(PROGRAMS / "sort_model.toml",
                               [f"modules.server.replication={workers}",
                                f"modules.client.args=[{n}, {[round(c, 6) for c in costs]}]"])
                cfg: dict[str, str | int] = {"algorithm": algo, "workers": workers,
                                             "model": "real" if workers in p.real else "sleep"}
                result.add(Row.of("polybus", cfg, n, "seconds", st))
                result.add(Row.of("polybus", cfg, n, "speedup", _speedup(one, st)))
                progress.advance(f"sort polybus {algo} {n} x{workers}")

    optional_peers.sort(result, p.sizes, p.real, p.reps, p.warmup, EXAMPLE / "server.py",
                        real_run, quick, progress)  # mpi4py beside the real rows, and 2^16
    _ratios(result)
    return result


def _ratios(result: BenchResult) -> None:
    """one_process/polybus at each algorithm's largest size with a one_process row (the
    target, 2^16 elements, is polybus and mpi4py alone: the largest of every row had no
    baseline, and insertion sort had no ratio)."""
    for algo in ALGORITHMS:
        rows = [r for r in result.rows if r.config.get("algorithm") == algo]
        sizes = [r.x for r in rows if r.system == "one_process" and r.metric == "seconds"]
        if not sizes:
            continue
        n = max(sizes)
        one = result.find("one_process", n, "seconds", {"algorithm": algo})
        for r in rows:
            if r.system == "polybus" and r.x == n and r.metric == "seconds":
                result.add_ratio(f"one_process/polybus {algo} n={int(n)} "
                                 f"workers={r.config['workers']} ({r.config['model']})", one, r)
