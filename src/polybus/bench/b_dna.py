"""dna (seeds/001 §2): sequence search with skewed query lengths, FIFO vs priority.

A query's cost is proportional to its length (a Pareto-skewed set: many short queries,
a few very long ones), modelled as time (see _balance.py). ``priority = "len(query)"``
serves the longest first — at the client's backlog under demand-driven dispatch and in
the replica queues — which is longest-processing-time-first scheduling; FIFO serves
them in the order the client makes them. Each makespan is reported over the lower bound.
"""

from __future__ import annotations

import random

import polybus
from polybus.bench._balance import MODEL_NOTE, Harness, lower_bound
from polybus.bench.exampledirs import example
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, ConfigValue, Ratio, Row
from polybus.bench.stats import summarize

__all__ = ["queries", "run"]

REPLICAS = 4


def queries(n: int, total_s: float, seed: int = 3) -> tuple[list[str], list[float]]:
    """``n`` queries with Pareto-skewed lengths and their costs, summing to total_s."""
    rng = random.Random(seed)
    lengths = [min(5000, int(10 * rng.paretovariate(1.2))) for _ in range(n)]
    qs = ["".join(rng.choice("ACGT") for _ in range(k)) for k in lengths]
    scale = total_s / sum(lengths)
    return qs, [k * scale for k in lengths]


def run(quick: bool, progress: Progress) -> BenchResult:
    # (--quick proves the run works: every dispatch and order, and the pipeline both
    # ways, on less work: PIPELINE_QUICK's 4 queries, not pipeline.toml's 16)
    n, total, reps = (60, 0.5, 1) if quick else (200, 4.0, 3)
    qs, costs = queries(n, total)
    u, d = "modules.client.use.compare", "modules.server.define.compare"
    styles = {"demand-driven": (f"{u}.callstyle=async-demand(1)",),
              "stealing": (f"{u}.callstyle=async", f"{u}.balance=steal")}
    result = BenchResult("dna", {"queries": n, "work_s": total, "reps": reps,
                                 "replicas": REPLICAS, "longest_share": max(costs) / total},
                         x_label="replicas")
    result.notes.append("model=sleep rows: " + MODEL_NOTE.split(";")[0]
                        + "; all replicas speed 1. model=real rows (the pipeline): the "
                        "search of examples/dna, nothing modelled")
    bound = lower_bound(costs, [1.0] * REPLICAS)
    result.params["lower_bound_s"] = bound
    progress.begin(reps * 2 * len(styles), "dna")
    times: dict[tuple[str, str], list[float]] = {}
    expect = sum(len(q) for q in qs)
    with Harness(str(REPLICAS)) as h:
        for _ in range(reps):
            for style, sets in styles.items():
                for order in ("fifo", "priority"):
                    extra = (f"{d}.priority=len(query)",) if order == "priority" else ()
                    t, res, _ = h.run("search", [qs, costs], (*sets, *extra))
                    assert res == expect, (style, order, res)
                    times.setdefault((style, order), []).append(t)
                    progress.advance(f"dna {style} {order}")
    for (style, order), ts in times.items():
        cfg: dict[str, ConfigValue] = {"dispatch": style, "order": order, "model": "sleep"}
        result.add(Row.of("polybus", cfg, REPLICAS, "seconds", summarize(ts)))
        result.add(Row.of("polybus", cfg, REPLICAS, "makespan_ratio",
                          summarize([t / bound for t in ts])))
    for style in styles:
        fifo = result.find("polybus", REPLICAS, "makespan_ratio",
                           {"dispatch": style, "order": "fifo"})
        prio = result.find("polybus", REPLICAS, "makespan_ratio",
                           {"dispatch": style, "order": "priority"})
        result.add_ratio(f"{style}: fifo / priority makespan", fifo, prio)
        for r, name in ((fifo, "fifo"), (prio, "priority")):
            if r is not None:
                result.ratios.append(Ratio(f"{style} {name} / lower bound", r.median))
    _pipeline(result, reps, quick)
    return result


PIPELINE = example("dna") / "pipeline.toml"
_STAGES = ("stage2", "stage3", "stage4")
#: --quick's pipeline arguments (main(n, size, entry_len, seed)): 4 queries, not the 16
#: of pipeline.toml, whose search took 1.1-2.5 s of pure Python a run here
PIPELINE_QUICK = [4, 32, 16, 1]


def _pipeline(result: BenchResult, reps: int, quick: bool) -> None:
    """seeds/001 Fig. 1(c) and 3: the database in 4 stages, each stage's answer sent
    straight to the next stage's replica (forwarding) or back through the client."""
    if not PIPELINE.is_file():
        result.skipped["pipeline"] = f"{PIPELINE} not found (examples/ ships with the source tree)"
        return
    base: dict[str, object] = {}
    if quick:
        base["modules.client.args"] = PIPELINE_QUICK
        result.params["pipeline_args"] = PIPELINE_QUICK
    off = {f"modules.client.use.{s}.forward": False for s in _STAGES}
    answers = {}
    for name, sets in (("forwarding", base), ("through client", {**base, **off})):
        secs, through = [], []
        for _ in range(reps):
            r = polybus.run(PIPELINE, sets)
            secs.append(r.elapsed_s)
            through.append(float(r.bytes_sent + r.bytes_received))
            answers[name] = r.result
        cfg: dict[str, ConfigValue] = {"dispatch": "pipeline", "path": name, "model": "real"}
        result.add(Row.of("polybus", cfg, 4, "seconds", summarize(secs)))
        result.add(Row.of("polybus", cfg, 4, "bytes_sent", summarize(through)))
    assert answers["forwarding"] == answers["through client"], "forwarding changed the answer"
    result.notes.append("pipeline rows: bytes_sent counts bytes through the client, both ways")
    result.add_ratio("pipeline: bytes through client, no forwarding / forwarding",
                     result.find("polybus", 4, "bytes_sent", {"path": "through client"}),
                     result.find("polybus", 4, "bytes_sent", {"path": "forwarding"}))
