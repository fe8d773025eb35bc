"""Peer programs the benchmarks measure polybus against.

The always-available peers (raw Python sockets, a C ping-pong, process pools, memcpy)
live in this package. The optional ones (pyzmq, mpi4py, Ray, Dask) are imported only
when asked about, never at import time: :func:`available` says which can run here.
"""

from __future__ import annotations

import importlib
import importlib.util

from polybus.errors import PolybusError

__all__ = ["OPTIONAL_PEERS", "PeerUnavailable", "available"]

#: system name (as in BENCHMARKS.md) -> (module to import, pip package that provides it)
OPTIONAL_PEERS: dict[str, tuple[str, str]] = {
    "pyzmq": ("zmq", "pyzmq"),
    "mpi4py": ("mpi4py.MPI", "mpi4py"),
    "ray": ("ray", "ray"),
    "dask": ("dask.distributed", "dask[distributed]"),
}

_cache: dict[str, str | None] = {}


class PeerUnavailable(PolybusError):
    """A peer cannot run on this machine; the message says why (its row is skipped)."""


def _check(module: str, package: str) -> str | None:
    top = module.split(".")[0]
    try:
        if importlib.util.find_spec(top) is None:
            return f"not installed (pip install {package})"
        if top == "mpi4py":
            # Load libmpi without MPI_Init: an MPI singleton in this process would leave
            # its shared-memory segment in /dev/shm. The programs run under mpiexec.
            rc = importlib.import_module("mpi4py").rc
            rc.initialize = rc.finalize = False
        importlib.import_module(module)
    except Exception as exc:  # any import-time failure (missing libmpi, ...) is a reason
        return f"import {module} failed: {type(exc).__name__}: {exc}"
    return None


def available(refresh: bool = False) -> dict[str, str | None]:
    """Which optional peers can run: ``None`` when importable, else the reason not."""
    if refresh:
        _cache.clear()
    for name, (module, package) in OPTIONAL_PEERS.items():
        if name not in _cache:
            _cache[name] = _check(module, package)
    return dict(_cache)
