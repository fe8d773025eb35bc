"""Where the two ends of a measurement run: same CPU, different CPUs, or left free.

On these (virtual) machines a wake-up on another CPU costs tens of microseconds, so a
loopback round trip is ~3x faster when client and server share a CPU than when they
do not, and a "free" run drifts from one to the other as the scheduler rebalances.
Every latency/bandwidth row therefore says its placement in ``config["cpus"]``, and
peers and polybus rows are compared only at the same placement.

- ``split``: client on the first allowed CPU, server on the second (the default; what
  a distributed call sees).
- ``same``: both on the first allowed CPU (the best case of a local call).
- ``free``: no pinning.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Literal

from polybus.bench.peers import PeerUnavailable
from polybus.pinning import pinned_thread

__all__ = ["DEFAULT", "Placement", "cpu_sets", "pin", "pinned_self"]

Placement = Literal["split", "same", "free"]
DEFAULT: Placement = "split"


def cpu_sets(placement: Placement) -> tuple[set[int], set[int]] | None:
    """(client CPUs, server CPUs) for ``placement``; None when nothing is pinned."""
    if placement == "free" or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if placement == "same":
        return {cpus[0]}, {cpus[0]}
    if placement == "split":
        if len(cpus) < 2:
            raise PeerUnavailable("placement 'split' needs 2 CPUs; this process has 1")
        return {cpus[0]}, {cpus[1]}
    raise ValueError(f"placement must be 'split', 'same' or 'free', not {placement!r}")


def pin(pid: int, cpus: set[int] | None) -> None:
    """Pin process ``pid`` (one this process started) to ``cpus``; None leaves it free."""
    if cpus is not None:
        os.sched_setaffinity(pid, cpus)


def pinned_self(cpus: set[int] | None) -> AbstractContextManager[None]:
    """The calling thread on ``cpus`` for the block (what it starts meanwhile inherits
    them), then it and the threads started meanwhile back on its previous CPUs
    (pinning.pinned_thread)."""
    return pinned_thread(cpus)
