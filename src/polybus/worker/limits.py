"""Each interface's own ``pool``: at most that many of its calls run at once.

A replica has one set of threads, as many as the largest ``pool`` of its interfaces
asks for (options_for). An interface that asks for fewer gets a limit of its own size
(`own_limits`, in ServeOptions.limits): with ``define.incr = { pool = 1 }`` beside
``define.other = { pool = 4 }``, calls to ``incr`` run one at a time (it may not be
thread-safe), where they used to take all four threads. An interface served over
``[serve]`` routes shares its limit with its ``@http`` form. A call past its limit
waits there, holding its thread. An interface whose pool is the replica's has no
limit and pays nothing.

``pool = "processes:N"`` interfaces share the replica's child processes, as many as
the largest of them asks for; each runs at most its own N calls at once.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

from polybus.http.response import HTTP_SUFFIX

if TYPE_CHECKING:
    from polybus.config.model import ModuleSpec

__all__ = ["Limit", "gated", "own_limits", "process_count"]

#: the interfaces that share one limit, and the limit
Limit = tuple[tuple[str, ...], int]


def process_count(spec: ModuleSpec) -> int:
    """The child processes a replica of ``spec`` starts (0: none asks for any)."""
    return max((d.pool for d in spec.define.values() if d.pool_kind == "processes"),
               default=0)


def own_limits(spec: ModuleSpec, threads: int, http: Collection[str] = ()) -> tuple[Limit, ...]:
    """A limit for each interface of ``spec`` whose ``pool`` is below ``threads``, shared
    with its ``@http`` form if it is in ``http``."""
    return tuple(((name, name + HTTP_SUFFIX) if name in http else (name,), d.pool)
                 for name, d in spec.define.items() if d.pool < threads)


def gated(functions: dict[str, Callable[..., Any]],
          limits: Iterable[Limit]) -> dict[str, Callable[..., Any]]:
    """``functions`` with one gate around the functions of each limit."""
    out = dict(functions)
    for names, n in limits:
        gate = threading.BoundedSemaphore(n)
        for name in names:
            if name in out:
                out[name] = _gate(out[name], gate)
    return out


def _gate(fn: Callable[..., Any], gate: threading.BoundedSemaphore) -> Callable[..., Any]:
    @functools.wraps(fn)  # (the signature stays visible: http_form reads it)
    def call(*args: Any, **kwargs: Any) -> Any:
        with gate:
            return fn(*args, **kwargs)

    return call
