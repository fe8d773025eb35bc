"""rudy: seeds/003 Tables 1-2 — HTTP requests of 40 ms of work on a bounded handler pool.

A web server whose requests take 40 ms of work, served by a bounded pool of handlers
with a queue for the overflow.

(a) N = 100..500 sequential requests (one client); (b) C = 100 clients, N = 100
requests, pool sizes PS = 1..100 (Table 2, Fig. 2: time against pool size); (c) no
delay: requests per second. polybus is `polybus serve` on programs/rudy.toml (the pool
is ``define.work.pool``); its peer in the same run is a plain asyncio HTTP server with
a pool of PS threads doing the same work, and uvicorn when it is installed.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from polybus.bench.httpload import LoadResult, load
from polybus.bench.peers._proc import PYTHON, python_child_env, reap
from polybus.bench.progress import Progress
from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import summarize

__all__ = ["run"]

PROGRAM = Path(__file__).parent / "programs" / "rudy.toml"
DELAY_MS = 40
Server = Callable[[int], AbstractContextManager[int]]


@contextmanager
def polybus_server(pool: int) -> Iterator[int]:
    """`polybus serve` with ``pool`` handlers; yields its port; SIGTERM and reap after."""
    with tempfile.NamedTemporaryFile(prefix="polybus-rudy-", suffix=".log") as log:
        proc = subprocess.Popen(
            [PYTHON, "-m", "polybus", "serve", str(PROGRAM), "--listen", "127.0.0.1:0",
             "--set", f"modules.web.define.work.pool={pool}", "--exit-with-parent"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            env=python_child_env())
        try:
            deadline = time.monotonic() + 60
            while True:
                text = Path(log.name).read_text(errors="replace")
                if "listening on http://" in text:
                    yield int(text.split("listening on http://", 1)[1].split()[0].rsplit(":", 1)[1])
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"polybus serve did not start:\n{text[-2000:]}")
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def peer_server(pool: int, uvicorn: bool = False) -> Iterator[int]:
    """The peer with ``pool`` handler threads; yields its port; it ends when its stdin
    closes (also if this process dies), and is reaped by PID."""
    argv = [PYTHON, "-m", "polybus.bench.peers.http_peer", "--pool", str(pool)]
    proc = subprocess.Popen([*argv, "--uvicorn"] if uvicorn else argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=python_child_env())
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("port "):
            raise RuntimeError(f"http peer did not start: {line!r}")
        yield int(line.split()[1])
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        reap(proc)


def _systems() -> tuple[dict[str, Server], dict[str, str]]:
    systems: dict[str, Server] = {
        "polybus": polybus_server, "asyncio_http": peer_server}
    skipped = {}
    if importlib.util.find_spec("uvicorn") is None:
        skipped["uvicorn"] = ("not installed (pip install uvicorn: an optional peer, in none of "
                               "polybus's extras)")
    else:
        systems["uvicorn"] = lambda pool: peer_server(pool, uvicorn=True)
    return systems, skipped


def _check(result: BenchResult, what: str, out: LoadResult) -> None:
    if out.failures:
        result.notes.append(f"{what}: non-2xx answers {out.failures}")


def pool_label(clients: int) -> str:
    """The pool-size table's first column, with the load it was measured under (the
    paper's rows read "C=100, N=100, PS=10")."""
    return f"pool size (PS); C={clients} clients, N={clients} requests"


def run(quick: bool, progress: Progress) -> BenchResult:
    # (--quick proves the run works: every table, fewer requests and pool sizes; 40
    # sequential requests were 1.6 s of modelled work for each system, and each pool
    # size a server started, ~1 s for polybus serve)
    seq_ns = [5, 10] if quick else [100, 200, 300, 400, 500]
    pools = [1, 100] if quick else [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    clients = 20 if quick else 100
    reps = 1 if quick else 3
    rate_n, rate_c, rate_pool = (200, 10, 4) if quick else (3000, 10, 4)
    systems, skipped = _systems()
    result = BenchResult("rudy", {
        "delay_ms": DELAY_MS, "sequential_n": seq_ns, "pools": pools, "clients": clients,
        "requests": clients, "reps": reps, "rate": {"n": rate_n, "c": rate_c, "pool": rate_pool},
        "load_generator": "asyncio streams, keep-alive connections opened before the clock, "
                          "one request in flight per connection, in the benchmark process"},
        x_label=pool_label(clients), skipped=skipped,
        x_labels={"sequential_s": "requests (N), one client",
                  "calls_per_s": "concurrent clients (C), no delay"})
    result.notes += [
        f"work is modelled: each request sleeps {DELAY_MS} ms in a handler of the pool",
        "sequential: the time of the first N answers of one run of "
        f"{seq_ns[-1]} requests (the answers come one after another)",
        "requests/s (metric calls_per_s): no delay, "
        f"{rate_n} requests over {rate_c} connections, pool {rate_pool}; polybus runs the "
        "front door and a replica (two processes, a call between them per request), the "
        "peer one process, beside the load generator on the same CPUs"]
    progress.begin(len(systems) * (len(pools) + 2), "rudy")
    path = f"/work?ms={DELAY_MS}"
    for system, start in systems.items():
        with start(1) as port:
            load("127.0.0.1", port, path, 2)  # warm-up
            outs = [load("127.0.0.1", port, path, seq_ns[-1], 1) for _ in range(reps)]
        for out in outs:
            _check(result, f"{system} sequential", out)
        for n in seq_ns:
            result.add(Row.of(system, {}, n, "sequential_s",
                              summarize([o.seconds_for(n) for o in outs])))
        progress.advance(f"rudy {system} sequential")
        for ps in pools:
            with start(ps) as port:
                load("127.0.0.1", port, path, ps, min(ps, clients))  # warm-up: every handler
                outs = [load("127.0.0.1", port, path, clients, clients) for _ in range(reps)]
            for out in outs:
                _check(result, f"{system} PS={ps}", out)
            result.add(Row.of(system, {}, ps, "seconds", summarize([o.seconds for o in outs])))
            progress.advance(f"rudy {system} PS={ps}")
        with start(rate_pool) as port:
            load("127.0.0.1", port, "/work?ms=0", rate_n // 10, rate_c)  # warm-up
            outs = [load("127.0.0.1", port, "/work?ms=0", rate_n, rate_c)
                    for _ in range(reps if quick else 5)]  # cheap: more repetitions
        for out in outs:
            _check(result, f"{system} no delay", out)
        result.add(Row.of(system, {}, rate_c, "calls_per_s",
                          summarize([rate_n / o.seconds for o in outs])))
        progress.advance(f"rudy {system} requests/s")
    for peer in (s for s in systems if s != "polybus"):
        for ps in dict.fromkeys((pools[0], pools[1], pools[-1])):  # (--quick has two)
            result.add_ratio(f"polybus/{peer} seconds, C={clients} N={clients} PS={ps}",
                             result.find("polybus", ps, "seconds"), result.find(peer, ps, "seconds"))
        result.add_ratio(f"polybus/{peer} seconds, {seq_ns[-1]} sequential",
                         result.find("polybus", seq_ns[-1], "sequential_s"),
                         result.find(peer, seq_ns[-1], "sequential_s"))
        result.add_ratio(f"polybus/{peer} requests/s, no delay",
                         result.find("polybus", rate_c, "calls_per_s"),
                         result.find(peer, rate_c, "calls_per_s"))
    return result


