"""What an engine does: make the replicas a configuration asks for reachable through a
registry, and take them down again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from polybus.config.model import ClusterSpec
from polybus.registry.service import RegistryService


@dataclass
class Cluster:
    """A running cluster, as a client sees it."""

    registry: str          # HOST:PORT or tcp://HOST:PORT
    token: bytes = field(repr=False)
    startup_s: float = 0.0
    # `polybus serve`'s engine restarts its failed workers until this is called
    halt_restarts: Callable[[], None] | None = field(default=None, repr=False)
    # How a worker of this engine's ended, by replica name ("was killed by signal 9
    # (SIGKILL)"), as far as the engine knows at once (asked on the client's reactor
    # path: it must not wait there), None if it has not (or the engine cannot tell
    # yet): said with its loss (client/lossline.py)
    how_ended: Callable[[str], str | None] | None = field(default=None, repr=False)
    # Where the engine's word comes a moment after a worker's connections close (an
    # mpi rank's report, Ray's answer about its actor): how it ended, waiting up to the
    # engine's own bound for that word. Asked on a thread of its own, when how_ended
    # had nothing, and the loss said once it answers.
    how_ended_later: Callable[[str], str | None] | None = field(default=None, repr=False)
    # A registry others use too (workers started by hand, `--registry`): each client
    # takes its turn of the registry's rotation (client/session.py), as clients of one
    # name server do; a run's own registry has the run's client alone.
    shared: bool = False
    # The engine's own registry tells the function given here the module of each worker
    # that registers there (None: tells no more), on the registry's thread, which it must
    # not block: serve's front door then looks for its lost replicas at once (a worker
    # started again, one taken for dead that answers again: http/revival.py). None where
    # the registry is not the engine's own.
    registrations: Callable[[Callable[[str], None] | None], None] | None = field(
        default=None, repr=False)


class Engine(Protocol):
    def start(self) -> Cluster: ...

    def stop(self) -> None: ...

    def ended(self, settle: float = 0.0) -> list[str]:
        """Lines saying what became of replicas that ended during the run (added to the
        run's error), waiting up to ``settle`` s for them to be seen."""
        ...


def run_registry(cluster: ClusterSpec, token: bytes) -> RegistryService:
    """A run's embedded registry: at ``listen_host`` on a free port, dropping a replica
    silent for three heartbeats."""
    return RegistryService(token, f"tcp://{cluster.listen_host}:0", ttl=3 * cluster.heartbeat)
