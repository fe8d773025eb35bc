"""What an engine does: make the replicas a configuration asks for reachable through a
registry, and take them down again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class Cluster:
    """A running cluster, as a client sees it."""

    registry: str          # HOST:PORT or tcp://HOST:PORT
    token: bytes = field(repr=False)
    startup_s: float = 0.0


class Engine(Protocol):
    def start(self) -> Cluster: ...

    def stop(self) -> None: ...

    def ended(self, settle: float = 0.0) -> list[str]:
        """Lines saying what became of replicas that ended during the run (added to the
        run's error), waiting up to ``settle`` s for them to be seen."""
        ...
