"""Ray peer: actor-call latency, ray.put/get bandwidth, no-op task throughput.

Run in a driver child (``python -m`` this module KIND ARGS) so Ray's daemons belong to
that child's process group and are ended with it. ``ray.init(num_cpus=2,
include_dashboard=False)`` inside a private network namespace whose only interface is
loopback (Ray otherwise binds to the host's outward address), usage stats off; ``ray.shutdown()`` at the
end. Written as Ray's docs recommend: an actor for repeated calls, ``ray.put`` for a
large operand (the object store), plain ``@ray.remote`` tasks for throughput.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from polybus.bench.peers import PeerUnavailable, why_unavailable
from polybus.bench.peers._driver import loopback_only_prefix, run_json
from polybus.bench.peers._proc import PYTHON, driver_figures, python_child_env
from polybus.bench.stats import Stat, seconds_each

__all__ = ["CONFIG", "measure"]

CONFIG: dict[str, str | int] = {"num_cpus": 2, "cpus": "free"}


def _driver(kind: str, args: list[Any]) -> dict[str, Any]:
    import numpy as np
    import ray

    t0 = time.perf_counter()
    # Ray's session files in a directory of this driver's, removed at the end (Ray
    # leaves each session's in /tmp/ray); short, for Ray's socket paths under it.
    session = tempfile.mkdtemp(prefix="polybus-ray-", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, _temp_dir=session)
    out: dict[str, Any] = {"startup_s": time.perf_counter() - t0}
    try:
        @ray.remote
        class Echo:
            def echo(self, x: Any) -> Any:
                return x

            def size(self, x: Any) -> int:
                return int(x.nbytes)

        @ray.remote  # type: ignore[untyped-decorator, unused-ignore]
        def noop(x: int) -> int:
            return x

        if kind == "latency":
            sizes, reps, iters = args
            actor = Echo.remote()  # type: ignore[attr-defined]
            ray.get(actor.echo.remote(b""))
            res = []
            for size, k in zip(sizes, iters, strict=True):
                payload = bytes(size)

                def round_trips(k: int = k, payload: bytes = payload) -> None:
                    for _ in range(k):
                        ray.get(actor.echo.remote(payload))

                res.append([s / k * 1e6 for s in seconds_each(round_trips, reps)])
            out["rtt_us"] = res
        elif kind == "bandwidth":
            sizes, reps = args
            actor = Echo.remote()  # type: ignore[attr-defined]
            res = []
            for size in sizes:
                data = np.full(size, 7, dtype=np.uint8)
                per = []
                for rep in range(reps + 1):
                    t = time.perf_counter()
                    ref = ray.put(data)
                    ray.get(actor.size.remote(ref))
                    if rep:
                        per.append(size / (time.perf_counter() - t) / 1e9)
                    del ref
                res.append(per)
            out["gbps"] = res
        elif kind == "throughput":
            calls, reps = args
            out["calls_per_s"] = [calls / s for s in seconds_each(
                lambda: ray.get([noop.remote(i) for i in range(calls)]), reps)]
    finally:
        ray.shutdown()
        shutil.rmtree(session, ignore_errors=True)
    return out


def measure(kind: str, args: Sequence[Any], timeout: float = 900) -> tuple[list[Stat], float]:
    """Run one Ray driver for ``kind``: a Stat per size (or one), and Ray's start-up (s)."""
    why = why_unavailable("ray")
    if why:
        raise PeerUnavailable(why)
    env = python_child_env()
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
    # Ray picks the host's outward address for its daemons whatever ray.init is told;
    # a private network namespace with only loopback keeps them on 127.0.0.1.
    prefix = loopback_only_prefix()
    if not prefix:
        raise PeerUnavailable("Ray binds its daemons to the host's outward address; running "
                              "it on loopback only needs a private network namespace "
                              "(unshare -n), which is not permitted here")
    out = run_json([*prefix, PYTHON, "-m", "polybus.bench.peers.ray_peer", kind,
                    json.dumps(list(args))], f"ray {kind}", timeout, env=env)
    return driver_figures(out, kind)


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    sys.stdout.write(json.dumps(_driver(sys.argv[1], json.loads(sys.argv[2]))) + "\n")
    sys.stdout.flush()
