"""Where a key of another framework's vocabulary goes in polybus's configuration.

A user who has sized a cluster elsewhere writes ``workers = 2`` (or ``n_workers``,
``num_workers``, ``replicas``, ``processes``) in a module's table, or ``threads = 4``:
no spelling of a valid key is near, so the hint listed the table's keys without
saying which one was meant. These names are told where their meaning lives: the
processes serving a module are its ``replication``, the threads running an
interface's calls its ``pool``. So are the names a program ported from Ray, Dask or
concurrent.futures brings: ``max_workers``, ``num_cpus`` (replication),
``max_concurrency`` (pool), ``max_retries`` (a lost call runs again; an exception does
not), ``chunksize`` (aggregate), ``num_gpus`` and ``resources`` (no counterpart). Used by
`Problems.unknown_keys` for every table (imports nothing of the configuration's, so
problems.py may import it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["foreign_hint"]

_REPLICAS = frozenset({"workers", "n_workers", "num_workers", "nworkers", "replicas",
                       "num_replicas", "processes", "nprocs",
                       "max_workers", "num_cpus"})  # (a process pool's; Ray's)
_THREADS = frozenset({"threads", "nthreads", "n_threads", "num_threads",
                      "threads_per_worker", "max_concurrency"})  # (a Ray actor's)
# Ray's and Dask's retries, a process pool's map chunks, Ray's and Dask's resources
_RETRIES = frozenset({"max_retries", "retries", "retry", "retry_exceptions"})
_CHUNKS = frozenset({"chunksize", "chunk_size", "batch_size"})
_RESOURCES = frozenset({"num_gpus", "gpus", "resources"})


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
    if place is None:
        return None
    n = (str(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0
         else "N")
    if place != "top" and (other := _other(name, place, n)) is not None:
        return f"{key!r} is not a key of polybus: {other}"
    if not (threads or name in _REPLICAS):
        return None
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


def _other(name: str, place: str, n: str) -> str | None:
    """Where a retry, chunk or resource name goes (``place`` the table it was written
    in, ``n`` its value as a count); None for another name."""
    if name in _RETRIES:
        return ("a call lost with its replica runs again on another, as long as its "
                "interface is idempotent (the default; idempotent = false stops it); an "
                "exception the function raises is not run again")
    if name in _CHUNKS:
        said = "calls to one replica travel together, up to N a message, with aggregate"
        return (f"{said}: aggregate = {n}" if place == "use" else
                f"{said}, a key of the client's use table: "
                f"modules.<client>.use.<name>.aggregate = {n}")
    if name in _RESOURCES:
        return ("nothing is placed by resources: a replica runs where its engine puts it, "
                "or where its worker is started by hand at a registry (docs/coming-from.md, "
                "'num_gpus')")
    return None
