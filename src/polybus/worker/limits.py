"""Each interface's own ``pool``: at most that many of its calls run at once.

A replica has one set of threads, as many as the largest ``pool`` of its interfaces
asks for (options_for). An interface that asks for fewer gets a limit of its own size
(`own_limits`, in ServeOptions.limits): with ``define.incr = { pool = 1 }`` beside
``define.other = { pool = 4 }``, calls to ``incr`` run one at a time (it may not be
thread-safe), where they used to take all four threads. An interface served over
``[serve]`` routes shares its limit with its ``@http`` form. The replica's queue keeps
the limits (lanes.py): a call past its limit waits in the queue, counted as waiting,
and the threads run the calls that may run. An interface whose pool is the replica's
has no limit, and a replica none of whose interfaces has one pays nothing.

``pool = "processes:N"`` interfaces share the replica's child processes, as many as
the largest of them asks for; each runs at most its own N calls at once.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from polybus.http.response import HTTP_SUFFIX

if TYPE_CHECKING:
    from polybus.config.model import ModuleSpec

__all__ = ["Limit", "own_limits", "process_count"]

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
