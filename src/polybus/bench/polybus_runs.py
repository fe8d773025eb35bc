"""Running the bench's own polybus programs: a real local cluster per measurement.

Each measurement is one ``polybus.run`` of ``programs/bench.toml`` with the entrypoint,
arguments, replication and call styles set by overrides, so the figures come from the
same path a user's program takes. The workers are started while this process is pinned
to the server CPUs (children inherit the affinity); the client pins its own thread to
the client CPUs inside its entrypoint (see ``programs/bench_client.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from polybus.bench.peers import PeerUnavailable
from polybus.bench.placement import Placement, cpu_sets, pinned_self
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import summarize

__all__ = ["PROGRAMS", "call_path_rows", "run_bench_client"]

PROGRAMS = Path(__file__).resolve().parent / "programs"
TOML = PROGRAMS / "bench.toml"


def run_bench_client(entry: str, args: Sequence[Any], *, replicas: int = 1,
                     placement: Placement = "free", transport: str = "tcp",
                     extra: Mapping[str, Any] | None = None,
                     pass_cpus: bool = True) -> dict[str, Any]:
    """Run ``bench_client.<entry>(*args, cpus)`` against ``replicas`` echo servers.

    Returns the client's result (a dict of per-repetition figures and ``family``).
    PeerUnavailable when the requested transport is not what the calls went over.
    """
    from polybus.runner import run

    cpus = cpu_sets(placement)
    full = list(args)
    if pass_cpus:
        full.append(sorted(cpus[0]) if cpus else [])  # TOML has no null
    sets = [f"modules.client.entrypoint={entry}",
            f"modules.client.args={json.dumps(full)}",
            f"modules.server.replication={replicas}"]
    if transport != "tcp":
        sets.append(f"modules.server.transport={transport}")
    sets += [f"{k}={v}" for k, v in (extra or {}).items()]
    with pinned_self(cpus[1] if cpus else None):
        out = run(TOML, sets)
    result: dict[str, Any] = out.result
    want = {"tcp": "tcp", "ipc": "unix", "shm": "shm"}.get(transport)
    if want is not None and result.get("family") != want:
        raise PeerUnavailable(f"transport {transport!r} was configured but the calls went "
                              f"over {result.get('family')}")
    return result


def call_path_rows(entry: str, args: Sequence[Any], figures: str, metric: str,
                   sizes: Sequence[int], placements: Sequence[Placement],
                   transports: Sequence[str], result: BenchResult | None) -> list[Row]:
    """One polybus row per (placement, transport, size) from ``bench_client.<entry>``,
    whose answer lists per-repetition ``figures`` for each size. A transport that
    cannot run here goes to ``result.skipped`` as ``polybus <transport>``."""
    rows: list[Row] = []
    for cpus in placements:
        for transport in transports:
            key = f"polybus {transport}"
            if result is not None and key in result.skipped:
                continue
            try:
                out = run_bench_client(entry, args, placement=cpus, transport=transport)
            except PeerUnavailable as exc:
                if result is not None:
                    result.skipped[key] = str(exc)
                continue
            for size, per_rep in zip(sizes, out[figures], strict=True):
                rows.append(Row.of("polybus", {"transport": transport, "cpus": cpus}, size,
                                   metric, summarize(per_rep)))
    return rows
