"""throughput: no-op calls per second with 2 workers, with and without aggregation.

The polybus pair: the same ``async-demand(DEMAND)`` calls each carrying (and getting
back) a PAYLOAD-byte bytes value, unaggregated and with ``aggregate = AGGREGATE``.

Peers side by side: concurrent.futures.ProcessPoolExecutor with chunksize 1 (one call
per message) and 100 (aggregated), and multiprocessing.Pool.map with chunksize 1.
Pools are started and warmed up before timing; x is the number of workers. The peers'
tasks (and mpi4py's) carry a small int, not PAYLOAD bytes: not quite the same work, and
the difference is against polybus.
"""

from __future__ import annotations

from polybus.bench import peer_rows as optional_peers
from polybus.bench.peers import pools
from polybus.bench.polybus_runs import run_bench_client
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import summarize

__all__ = ["AGGREGATE", "DEMAND", "LINGER", "LONE", "METRIC", "PAYLOAD", "WORKERS", "Plan", "add_ratios", "peer_rows", "plan", "polybus_rows",
           "run"]

METRIC = "calls_per_s"
WORKERS = 2
DEMAND = 64      # calls outstanding per replica (async-demand(N))
AGGREGATE = 100  # calls per batch in the aggregated row, as process_pool chunksize=100
PAYLOAD = 100    # bytes each polybus call carries and gets back
LINGER = "1ms"   # the configuration's default linger
# µs per call made only after the last was answered: a round trip (BENCHMARKS.md's
# metric names), told apart from the rate rows by its metric and its config (in_flight=1)
LONE = "rtt_us"
_LONE_OUT = "one_in_flight_us"  # (the bench client's key for it)


class Plan:
    """Calls per repetition (per configuration) and repetitions."""

    def __init__(self, quick: bool) -> None:
        self.reps = 3 if quick else 5
        scale = 1 if quick else 20
        self.calls_unbatched = 500 * scale    # chunksize 1: ~1e4 calls/s
        self.calls_batched = 20_000 * scale   # chunksize 100: ~1e5-1e6 calls/s
        self.calls_mp = 2_000 * scale
        self.calls_polybus = 2_000 * scale    # ~3e4 calls/s
        self.lone = 200 * scale               # one call in flight: ~100 us each


def plan(quick: bool) -> Plan:
    return Plan(quick)


def polybus_rows(quick: bool) -> list[Row]:
    """No-op calls/s of PAYLOAD bytes against ``WORKERS`` local replicas under
    ``async-demand(DEMAND)``, unaggregated and aggregated (the same calls otherwise).

    The client sends every call of a repetition before it waits for any answer; the
    demand watermark keeps at most DEMAND outstanding per replica. The aggregated row
    is the same with ``use.noop.aggregate``.
    """
    p = plan(quick)
    rows: list[Row] = []
    style = f"async-demand({DEMAND})"
    variants: list[tuple[dict[str, str | int], dict[str, str]]] = [
        ({"callstyle": style, "aggregate": 1, "payload": PAYLOAD}, {}),
        ({"callstyle": style, "aggregate": AGGREGATE, "payload": PAYLOAD},
         {"modules.client.use.noop.aggregate": str(AGGREGATE)})]
    for config, extra in variants:
        calls = p.calls_polybus if config["aggregate"] == 1 else p.calls_batched
        out = run_bench_client("throughput", [calls, p.reps, PAYLOAD, p.lone], replicas=WORKERS,
                               pass_cpus=False,
                               extra={"modules.client.use.noop.callstyle": style, **extra})
        rows.append(Row.of("polybus", config, WORKERS, METRIC, summarize(out["calls_per_s"])))
        rows.append(Row.of("polybus", {**config, "linger": LINGER if config["aggregate"] != 1
                                       else "-", "in_flight": 1}, WORKERS, LONE,
                           summarize(out[_LONE_OUT])))
    return rows


def peer_rows(result: BenchResult, quick: bool, progress: Progress) -> None:
    p = plan(quick)
    for chunksize, calls in ((1, p.calls_unbatched), (100, p.calls_batched)):
        st = pools.process_pool_calls_per_s(chunksize, calls, p.reps, WORKERS)
        result.add(Row.of("process_pool", {"chunksize": chunksize}, WORKERS, METRIC, st))
        progress.advance(f"throughput process_pool chunksize {chunksize}")
    st = pools.mp_pool_calls_per_s(1, p.calls_mp, p.reps, WORKERS)
    result.add(Row.of("multiprocessing", {"chunksize": 1}, WORKERS, METRIC, st))
    progress.advance("throughput multiprocessing")


def add_ratios(result: BenchResult) -> None:
    """Each polybus row over ProcessPoolExecutor chunksize 1 and 100, and over mp.Pool."""
    pp1 = result.find("process_pool", WORKERS, METRIC, {"chunksize": 1})
    pp100 = result.find("process_pool", WORKERS, METRIC, {"chunksize": 100})
    mp = result.find("multiprocessing", WORKERS, METRIC)
    result.add_ratio("process_pool chunksize=100 / chunksize=1 calls/s", pp100, pp1)
    for r in [r for r in result.rows if r.system == "polybus" and r.metric == METRIC]:
        result.add_ratio(f"{r.label} / process_pool chunksize=1 calls/s", r, pp1)
        result.add_ratio(f"{r.label} / process_pool chunksize=100 calls/s", r, pp100)
        result.add_ratio(f"{r.label} / multiprocessing calls/s", r, mp)


def run(quick: bool, progress: Progress) -> BenchResult:
    p = plan(quick)
    result = BenchResult("throughput", {"workers": WORKERS, "reps": p.reps,
                                        "calls": {"process_pool chunksize=1": p.calls_unbatched,
                                                  "process_pool chunksize=100": p.calls_batched,
                                                  "multiprocessing": p.calls_mp},
                                        "start_method": pools.START_METHOD},
                         x_label="workers")
    result.params["calls"]["polybus"] = p.calls_polybus
    progress.begin(7, "throughput")
    peer_rows(result, quick, progress)
    optional_peers.throughput(result, WORKERS, quick, progress)  # mpi4py, ray, dask
    result.rows.extend(polybus_rows(quick))
    progress.advance("throughput polybus")
    add_ratios(result)
    optional_peers.throughput_ratios(result, WORKERS)
    one = result.find("polybus", WORKERS, METRIC, {"aggregate": 1})
    agg = result.find("polybus", WORKERS, METRIC, {"aggregate": AGGREGATE})
    result.add_ratio(f"polybus aggregate={AGGREGATE} / aggregate=1 calls/s ({PAYLOAD}-byte calls)",
                     agg, one)
    lone1 = result.find("polybus", WORKERS, LONE, {"aggregate": 1})
    lone_agg = result.find("polybus", WORKERS, LONE, {"aggregate": AGGREGATE})
    result.add_ratio(f"polybus one call in flight, aggregate={AGGREGATE} / aggregate=1 us",
                     lone_agg, lone1)
    return result
