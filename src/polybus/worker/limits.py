"""Each interface's own ``pool``: at most that many of its calls run at once.

A replica has one set of threads, as many as the largest ``pool`` of its interfaces
asks for (options_for). An interface that asks for fewer gets a gate of its own size
around its function: with ``define.incr = { pool = 1 }`` beside ``define.other = {
pool = 4 }``, calls to ``incr`` run one at a time (it may not be thread-safe), where
they used to take all four threads. A call past its gate waits there, holding its
thread. An interface whose pool is the replica's has no gate and pays nothing.

``pool = "processes:N"`` interfaces share the replica's child processes, as many as
the largest of them asks for; each runs at most its own N calls at once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from polybus.config.model import ModuleSpec

__all__ = ["gated", "process_count"]


def process_count(spec: ModuleSpec) -> int:
    """The child processes a replica of ``spec`` starts (0: none asks for any)."""
    return max((d.pool for d in spec.define.values() if d.pool_kind == "processes"),
               default=0)


def gated(functions: dict[str, Callable[..., Any]], spec: ModuleSpec,
          threads: int) -> dict[str, Callable[..., Any]]:
    """``functions`` with a gate around each one whose ``pool`` is below ``threads``."""
    out = dict(functions)
    for name, fn in functions.items():
        d = spec.define.get(name)
        if d is not None and d.pool < threads:
            out[name] = _gate(fn, d.pool)
    return out


def _gate(fn: Callable[..., Any], n: int) -> Callable[..., Any]:
    gate = threading.BoundedSemaphore(n)

    @functools.wraps(fn)  # (the signature stays visible: http_form reads it)
    def call(*args: Any, **kwargs: Any) -> Any:
        with gate:
            return fn(*args, **kwargs)

    return call
