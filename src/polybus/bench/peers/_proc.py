"""Child processes of the peers: started here, recorded by PID, always reaped.

Every peer starts its children through :func:`spawn` and ends them with :func:`reap`
inside a ``finally``, so an interrupted benchmark leaves nothing behind. The PIDs are
kept (the last few hundred) so tests can check each one is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polybus.bench.stats import Stat

__all__ = ["driver_figures", "python_child_env", "reap", "spawn", "spawned_pids"]

_spawned: deque[int] = deque(maxlen=512)


def spawn(argv: Sequence[str], env: dict[str, str] | None = None,
          new_session: bool = False) -> subprocess.Popen[bytes]:
    """Start ``argv``; ``new_session`` makes it a process-group leader, so whatever it
    starts in turn (Ray's daemons, Dask's nannies) can be ended with its group."""
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, start_new_session=new_session)
    _spawned.append(proc.pid)
    return proc


def reap(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """Wait for ``proc`` to exit (it should, on EOF); terminate, then kill it if not."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def spawned_pids() -> list[int]:
    """PIDs of children the peers started, oldest first."""
    return list(_spawned)


def python_child_env() -> dict[str, str]:
    """This environment, with polybus importable in a child even when not installed."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


PYTHON = sys.executable


_FIGURES = {"latency": "rtt_us", "bandwidth": "gbps", "throughput": "calls_per_s"}


def driver_figures(out: dict[str, Any], kind: str) -> tuple[list[Stat], float]:
    """A peer driver's JSON answer for ``kind``: a Stat per size (or one), and the
    peer's start-up time in seconds."""
    from polybus.bench.stats import summarize

    vals = out[_FIGURES[kind]]
    stats = ([summarize(v) for v in vals] if vals and isinstance(vals[0], list)
             else [summarize(vals)])
    return stats, float(out["startup_s"])
