"""What the load-balancing benchmarks (mandelbrot, dna) share: work modelled as time.

This machine has 2 cores, so four servers of different speed cannot be real: a task of
cost c (seconds on a speed-1 server) is a ``time.sleep(c)`` on the server, and a replica
of speed s makes it last c / s (the replica's speed emulation). One cluster of workers
is started per benchmark and every strategy runs against it as a fresh client session,
so start-up is paid once and never inside a figure.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.client.stats import SessionStats
from polybus.client.stubs import activate
from polybus.config import load
from polybus.engines.local import LocalEngine
from polybus.worker.module import load_module

#: Kim and Purtilo (CORD), Table 1 (a): single-server async times 125, 59, 52, 30 s
PAPER_TIMES = {"harvey": 125.0, "rimfire": 59.0, "thumper": 52.0, "highpower": 30.0}
#: speeds proportional to 1/time, the fastest 1
SPEEDS = {n: round(min(PAPER_TIMES.values()) / t, 3) for n, t in PAPER_TIMES.items()}
NAMES = list(PAPER_TIMES)
MODEL_NOTE = ("work modelled as time: a task of cost c seconds sleeps c/s on a replica of "
              "speed s (2-core machine); speeds proportional to 1/125, 1/59, 1/52, 1/30 "
              "(Kim and Purtilo, \"Configuration-level optimization of RPC-based "
              "distributed programs\", Table 1), fastest = 1")

SERVER = '''
import time


def work(task: int, cost: float) -> int:
    time.sleep(cost)
    return task


def compare(query: str, cost: float) -> int:
    time.sleep(cost)
    return len(query)
'''

CLIENT = '''
from polybus import use

work = use("work")
compare = use("compare")


def rows(costs: list[float]) -> int:
    answers = [work(i, c) for i, c in enumerate(costs)]
    return sum(int(a) for a in answers)


def search(queries: list[str], costs: list[float]) -> int:
    answers = [compare(q, c) for q, c in zip(queries, costs)]
    return sum(int(a) for a in answers)
'''

APP = '''
[modules.server]
source = "server.py"
replication = 1
define.work = {}
define.compare = {}

[modules.client]
source = "client.py"
entrypoint = "rows"
args = [[]]  # (check binds them to rows(costs); the harness calls each entrypoint itself)
use.work = { callstyle = "async" }
use.compare = { callstyle = "async" }

[bind]
"client.work" = "server.work"
"client.compare" = "server.compare"
'''


def replicas(names: Sequence[str] = NAMES, speeds: dict[str, float] = SPEEDS) -> str:
    return ",".join(f"{n}:speed={speeds[n]:g}" for n in names)


def lower_bound(costs: Sequence[float], speeds: Sequence[float]) -> float:
    """max(total work / total speed, the largest task on the fastest server)."""
    return max(sum(costs) / sum(speeds), max(costs) / max(speeds))


class Harness:
    """A cluster of modelled servers; `run` times one strategy against it."""

    def __init__(self, replication: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="polybus-balance-"))
        (self.dir / "server.py").write_text(SERVER)
        (self.dir / "client.py").write_text(CLIENT)
        (self.dir / "app.toml").write_text(APP)
        self.base = (f"modules.server.replication={replication}",)
        try:
            self.engine = LocalEngine(load(self.dir / "app.toml", self.base), self.base)
            self.cluster = self.engine.start()  # (stops what it started if it fails)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.module = load_module(self.dir / "client.py", "polybus_user_bench_balance")

    def run(self, entry: str, args: Sequence[Any], overrides: Sequence[str] = ()
            ) -> tuple[float, Any, SessionStats]:
        app = load(self.dir / "app.toml", (*self.base, *overrides))
        session = Session(app, self.cluster.registry, self.cluster.token,
                          how_ended=self.cluster.how_ended)
        try:
            activate(session)
            t0 = time.perf_counter()
            result = wait(getattr(self.module, entry)(*args))
            elapsed = time.perf_counter() - t0
            stats = session.stats()
        finally:
            activate(None)
            session.close()
        return elapsed, result, stats

    def close(self) -> None:
        try:
            self.engine.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
