"""Where a key of another framework's vocabulary goes in polybus's configuration.

A user who has sized a cluster elsewhere writes ``workers = 2`` (or ``n_workers``,
``num_workers``, ``replicas``, ``processes``) in a module's table, or ``threads = 4``:
no spelling of a valid key is near, so the hint listed the table's keys without
saying which one was meant. These names are told where their meaning lives: the
processes serving a module are its ``replication``, the threads running an
interface's calls its ``pool``. Used by `Problems.unknown_keys` for every table
(imports nothing of the configuration's, so problems.py may import it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["foreign_hint"]

_REPLICAS = frozenset({"workers", "n_workers", "num_workers", "nworkers", "replicas",
                       "num_replicas", "processes", "nprocs"})
_THREADS = frozenset({"threads", "nthreads", "n_threads", "num_threads",
                      "threads_per_worker"})


def _place(path: Sequence[str]) -> str | None:
    """Which table ``path`` (its dotted parts) is: top, cluster, module, define, use."""
    if not path:
        return "top"
    if tuple(path) == ("cluster",):
        return "cluster"
    if path[0] == "modules" and len(path) == 2:
        return "module"
    if path[0] == "modules" and len(path) == 4 and path[2] in ("define", "use"):
        return path[2]
    return None


def foreign_hint(key: str, value: Any, path: Sequence[str]) -> str | None:
    """Where ``key``, written with ``value`` in the table at ``path``, goes, when it is
    one of the names above; else None."""
    name = key.casefold().replace("-", "_")
    threads = name in _THREADS
    place = _place(path)
    if place is None or not (threads or name in _REPLICAS):
        return None
    n = (str(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0
         else "N")
    module = path[1] if place in ("module", "define") else "<key>"
    said = f"{key!r} is not a key of polybus: "
    if place == "define" and (threads or name == "processes"):
        pool = n if threads else f'"processes:{n}"'
        what = "threads" if threads else "child processes"
        return said + f"the {what} that run this interface's calls are its pool: pool = {pool}"
    if threads:
        where = ("define.<iface>.pool of the module the interface is bound to"
                 if place == "use" else f"modules.{module}.define.<iface>.pool = {n}")
        return said + ("the threads that run an interface's calls on a replica are its "
                       f"pool: {where}")
    if place == "module":
        return said + f"the processes that serve a module are its replicas: replication = {n}"
    where = ("modules.<key>.replication of the module the interface is bound to"
             if place == "use" else f"modules.{module}.replication = {n}")
    return said + f"the processes that serve a module are its replicas, a key of the module: {where}"
