"""Is a replica that holds our calls still there? Decided without sockets or threads.

TCP notices a dead peer only when a write fails or the peer resets, which a network
partition never does: the client would wait as long as its calls' deadlines (forever
without one). So while calls are outstanding on a replica that has been silent for a
``heartbeat``, the client pings it (the worker answers Ping even while all its pool
threads run long calls, from its standby thread), and after ``misses`` heartbeats with
no byte from it the replica is declared dead and its calls go elsewhere.

"Heard" is read from the link's received-byte counter at each check, so nothing is
timed on the receive path; silence is known to within one check interval, and a link
is only ever declared dead late, never early.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

MISSES = 3  # heartbeats of silence before a replica holding calls is declared dead


def decide(watched: Mapping[K, tuple[float, float | None]], now: float, heartbeat: float,
           misses: int = MISSES) -> tuple[list[K], list[K]]:
    """``watched``: link -> (last heard, last pinged or None), for links holding calls.

    Returns (links to ping now, links to declare dead). A link silent for ``misses``
    heartbeats is dead; one silent for a heartbeat is pinged, at most once a heartbeat.
    """
    ping: list[K] = []
    dead: list[K] = []
    for key, (heard, pinged) in watched.items():
        silence = now - heard
        if silence >= misses * heartbeat:
            dead.append(key)
        elif silence >= heartbeat and (pinged is None or pinged < heard
                                       or now - pinged >= heartbeat):
            ping.append(key)
    return ping, dead


@dataclass
class _Watch:
    heard: float
    seen: int            # the link's received-byte count when last looked at
    pinged: float | None = None


class Liveness(Generic[K]):
    """Per-link silence, fed by `check` with each busy link's received-byte counter."""

    def __init__(self, heartbeat: float, misses: int = MISSES) -> None:
        self.heartbeat = heartbeat
        self.misses = misses
        self.next_check = 0.0
        self._watch: dict[K, _Watch] = {}

    def due(self, now: float) -> bool:
        return now >= self.next_check

    def check(self, links: Iterable[tuple[K, int, bool]], now: float) -> tuple[list[K], list[K]]:
        """``links``: (link, bytes received so far, holds calls?). Returns (ping, dead).

        A link that starts holding calls is counted as heard now: its silence starts
        with the first check that sees it busy.
        """
        busy: dict[K, tuple[float, float | None]] = {}
        for key, received, holds_calls in links:
            w = self._watch.get(key)
            if not holds_calls:
                if w is not None:
                    del self._watch[key]
                continue
            if w is None:
                w = self._watch[key] = _Watch(now, received)
            elif received != w.seen:
                w.heard, w.seen = now, received
            busy[key] = (w.heard, w.pinged)
        ping, dead = decide(busy, now, self.heartbeat, self.misses)
        for key in ping:
            self._watch[key].pinged = now
        for key in dead:
            del self._watch[key]
        self.next_check = now + self.heartbeat / 2
        return ping, dead
