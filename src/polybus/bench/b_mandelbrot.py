"""mandelbrot (seeds/001 Table 1): 200 row calls on four servers of different speed.

(a) each server alone, sync vs async; (b) all four together under equal split (Type 1),
a linear migration path fed at its head (Type 2), a ring with equal initial split
(Type 3), demand-driven, stealing, and a static ratio whose speed estimates are wrong
by 2x with and without stealing. Row costs are the real escape-iteration counts of the
200x200 window over [-1.8,-1.2]..[0.5,1.2], scaled to a total of W seconds and modelled
as time (see _balance.py). Each makespan is also reported over the lower bound.
Every cell, (a)'s and (b)'s, is the median of ``reps`` runs, in rounds of all of them.
"""

from __future__ import annotations

import numpy as np

from polybus.bench._balance import MODEL_NOTE, NAMES, SPEEDS, Harness, lower_bound, replicas
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, ConfigValue, Ratio, Row
from polybus.bench.stats import summarize

__all__ = ["row_costs", "run", "strategies"]


def row_costs(total_s: float, size: int = 200, maxiter: int = 256) -> list[float]:
    """Seconds per row (on a speed-1 server): 1 + escape iterations, scaled to total_s."""
    ys = np.linspace(-1.2, 1.2, size)[:, None]
    xs = np.linspace(-1.8, 0.5, size)[None, :]
    c = xs + 1j * ys
    z = np.zeros_like(c)
    count = np.zeros(c.shape, dtype=np.int64)
    for _ in range(maxiter):
        live = np.abs(z) <= 2.0
        z[live] = z[live] ** 2 + c[live]
        count += live
    per_row = count.sum(axis=1).astype(float) + size  # a fixed cost per pixel too
    return [float(v) for v in per_row * (total_s / per_row.sum())]


def _ratio(weights: dict[str, float]) -> str:
    # In the order the configuration lists the replicas: a load ratio's shares follow it.
    return ":".join(f"{weights[n]:g}" for n in NAMES)


def strategies() -> dict[str, tuple[str, ...]]:
    """(b): name -> overrides of the client's configuration."""
    speeds = {n: SPEEDS[n] for n in NAMES}
    line = "#".join(f"{n}:speed={speeds[n]:g}(oc=(load>=2),uc=(load==0))" for n in NAMES)
    ring = "#".join(f"{n}:speed={speeds[n]:g}" for n in [*NAMES, NAMES[0]])
    wrong = {n: speeds[n] * (2.0 if i % 2 else 0.5) for i, n in enumerate(NAMES)}
    u = "modules.client.use.work"
    r = "modules.server.replication"
    return {
        "equal split (Type 1)": (f"{u}.callstyle=async",),
        "linear path (Type 2)": (f"{r}={line}:[1/2]",
                                 f"{u}.loadratio={_ratio({n: float(n == NAMES[0]) for n in NAMES})}"),
        "ring, equal split (Type 3)": (f"{r}={ring}:[1/2]",),
        "demand-driven": (f"{u}.callstyle=async-demand(2)",),
        "stealing": (f"{u}.balance=steal",),
        "ratio 2x wrong": (f"{u}.loadratio={_ratio(wrong)}",),
        "ratio 2x wrong + stealing": (f"{u}.loadratio={_ratio(wrong)}", f"{u}.balance=steal"),
        "ratio right": (f"{u}.loadratio={_ratio(speeds)}",),
    }


def _alone(name: str, style: str) -> tuple[str, ...]:
    u = "modules.client.use.work"
    return (f"{u}.callstyle={style}", f"{u}.loadratio={_ratio({n: float(n == name) for n in NAMES})}")


def run(quick: bool, progress: Progress) -> BenchResult:
    # (--quick proves the run works: every server and strategy, each of the 200 rows a
    # call, with a twentieth of the modelled work; it was a fifth, ~8 s of sleep)
    total_a, total_b, reps = (0.05, 0.3, 1) if quick else (1.0, 6.0, 3)
    costs_a, costs_b = row_costs(total_a), row_costs(total_b)
    strat = strategies()
    result = BenchResult("mandelbrot", {"rows": 200, "work_a_s": total_a, "work_b_s": total_b,
                                        "reps": reps, "speeds": SPEEDS}, x_label="servers")
    result.notes.append(MODEL_NOTE)
    progress.begin(reps * (2 * len(NAMES) + len(strat)), "mandelbrot")
    expect = sum(range(200))
    alone = [(name, style) for name in NAMES for style in ("sync", "async")]
    with Harness(replicas()) as h:
        # (a) one server at a time, ``reps`` rounds of every server and style, as (b)
        # (it ran once: single measurements beside (b)'s medians)
        took: dict[tuple[str, str], list[float]] = {cell: [] for cell in alone}
        for _ in range(reps):
            for name, style in alone:
                t, res, _ = h.run("rows", [costs_a], _alone(name, style))
                assert res == expect, (name, style, res)
                took[name, style].append(t)
                progress.advance(f"mandelbrot {style} on {name}")
        for (name, style), ts in took.items():
            lb = sum(costs_a) / SPEEDS[name]
            cfg: dict[str, ConfigValue] = {"strategy": f"{style} on {name}",
                                           "speed": SPEEDS[name]}
            result.add(Row.of("polybus", cfg, 1, "seconds", summarize(ts)))
            result.add(Row.of("polybus", cfg, 1, "makespan_ratio",
                              summarize([t / lb for t in ts])))
        bound = lower_bound(costs_b, list(SPEEDS.values()))
        times: dict[str, list[float]] = {k: [] for k in strat}
        moved: dict[str, list[float]] = {k: [] for k in strat}
        for _ in range(reps):
            for key, sets in strat.items():
                t, res, stats = h.run("rows", [costs_b], sets)
                assert res == expect, (key, res)
                times[key].append(t)
                moved[key].append(100.0 * sum(r.migrated_in for r in stats.replicas) / 200)
                progress.advance(f"mandelbrot {key}")
    for key in strat:
        cfg = {"strategy": key}
        result.add(Row.of("polybus", cfg, 4, "seconds", summarize(times[key])))
        result.add(Row.of("polybus", cfg, 4, "makespan_ratio",
                          summarize([t / bound for t in times[key]])))
        result.add(Row.of("polybus", cfg, 4, "moved_pct", summarize(moved[key])))
    result.params["lower_bound_s"] = bound
    _ratios(result, total_b / total_a, times)
    return result


def _find(result: BenchResult, key: str) -> Row | None:
    return result.find("polybus", 4, "seconds", {"strategy": key})


def _ratios(result: BenchResult, scale: float, times: dict[str, list[float]]) -> None:
    for key in times:
        row = result.find("polybus", 4, "makespan_ratio", {"strategy": key})
        if row is not None:
            result.ratios.append(Ratio(f"{key} / lower bound", row.median))
    slow = result.find("polybus", 1, "seconds", {"strategy": "async on harvey"})
    eq = _find(result, "equal split (Type 1)")
    if slow is not None and eq is not None:
        # seeds/001: equal split degrades to the slowest server's time / 4 (34 ~ 125/4)
        # (a) ran a smaller total of work: scale the slowest server's time to (b)'s
        q = scale / 4
        result.add_ratio("equal split / (slowest alone / 4)  [paper: 34/(125/4) = 1.09]",
                         eq, Row("polybus", {}, 4, "seconds", slow.median * q, slow.min * q,
                                 slow.max * q, slow.n))
    result.add_ratio("ratio 2x wrong / ratio 2x wrong + stealing",
                     _find(result, "ratio 2x wrong"), _find(result, "ratio 2x wrong + stealing"))
    result.add_ratio("stealing / equal split", _find(result, "stealing"),
                     _find(result, "equal split (Type 1)"))

