"""Which replica gets the next call. Pure: a view of the replicas in, a choice out.

A policy sees, for each live replica, its position and how many calls this interface
has outstanding there; it never touches a socket.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Sequence
from typing import Any


class RoundRobin:
    """The name server's rotation of seeds/002: each replica in turn, from ``start``
    (the client's turn at a registry other clients share, so that theirs begin at
    other replicas; 0 for a run's own registry)."""

    def __init__(self, start: int = 0) -> None:
        self._next = max(0, start)

    def pick(self, alive: Sequence[bool]) -> int | None:
        n = len(alive)
        for k in range(n):
            i = (self._next + k) % n
            if alive[i]:
                self._next = i + 1
                return i
        return None

    def pick_open(self, links: Sequence[Any], isolated: Container[int]) -> int | None:
        """`pick` over replica links: the next one not dead and not running a suspect
        alone (``isolated``), with no list made (the async hot path). A replica still
        running a call the client gave up on (``abandoned``) is passed over while
        another is free of them: a call sent there would wait behind it."""
        n = len(links)
        later: int | None = None
        for k in range(n):
            i = (self._next + k) % n
            lk = links[i]
            if lk.dead or i in isolated:
                continue
            if lk.abandoned:
                if later is None:
                    later = i
                continue
            self._next = i + 1
            return i
        if later is not None:
            self._next = later + 1
        return later


class LeastLoaded(RoundRobin):
    """``balance = "least"``: the live replica with the fewest of this client's calls
    running or queued there (every interface's, those given up on included, an
    aggregated batch counting as one: `ReplicaLink.load`), the next in rotation on a
    tie. A call sent at once (``async``) then never queues behind a replica's long call
    while another replica idles, which a rotation does (join the shortest queue). As in
    the rotation, a replica still running a call the client gave up on (``abandoned``)
    is passed over while another is free of them, however loaded."""

    def __init__(self, links: Sequence[Any], start: int = 0) -> None:
        super().__init__(start)
        self.links = links

    def pick(self, alive: Sequence[bool]) -> int | None:
        return self._least(lambda i: alive[i])

    def pick_open(self, links: Sequence[Any], isolated: Container[int]) -> int | None:
        return self._least(lambda i: not links[i].dead and i not in isolated)

    def _least(self, ok: Any) -> int | None:
        links = self.links
        n = len(links)
        best: tuple[bool, int] | None = None  # (has abandoned calls, load)
        at: int | None = None
        for k in range(n):
            i = (self._next + k) % n
            if ok(i):
                lk = links[i]
                mine = (bool(lk.abandoned), lk.load)
                if best is None or mine < best:
                    best, at = mine, i
                    if mine == (False, 0):
                        break  # (an idle replica: none is less loaded)
        if at is not None:
            self._next = at + 1
        return at


class WeightedRoundRobin:
    """Static load ratio (``loadratio = "1:2:4"``): smooth weighted rotation.

    Over any window of sum(weights) calls each live replica i gets weights[i] of them,
    spread out rather than in runs (the nginx smooth-weighted scheme). A replica past the
    last share gets none (the session refuses a ratio shorter than its replicas:
    client/choosing.py `check_shares`; this never fails a call with an IndexError).
    """

    def __init__(self, weights: Sequence[float]) -> None:
        if not weights or any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError("load ratio weights must be non-negative with a positive sum")
        self.weights = list(weights)
        self._current = [0.0] * len(weights)

    def pick(self, alive: Sequence[bool]) -> int | None:
        weights = self.weights  # (zip: a replica past the last share is not picked)
        live = [i for i, (a, w) in enumerate(zip(alive, weights, strict=False)) if a and w > 0]
        if not live:
            return None
        total = sum(self.weights[i] for i in live)
        for i in live:
            self._current[i] += self.weights[i]
        best = max(live, key=lambda i: self._current[i])
        self._current[best] -= total
        return best


def demand_pick(inflight: Sequence[int], window: Sequence[int], alive: Sequence[bool],
                load: Sequence[int] | None = None, start: int = 0) -> int | None:
    """Demand-driven: the live replica with room in its window and the least ``load``
    (every interface's calls there, those given up on included: a replica busy with
    another interface's long call is not free), then the fewest of this interface's
    calls outstanding, the first in order from ``start`` (the client's turn, as for
    `RoundRobin`) on a tie; None when every window is full."""
    weigh = inflight if load is None else load
    best: int | None = None
    order: Iterator[tuple[int, tuple[int, int, bool]]] = enumerate(
        zip(inflight, window, alive, strict=True))
    cut = start % len(inflight) if inflight else 0
    if cut:  # (from the client's turn: the order rotated)
        rows = list(order)
        order = iter(rows[cut:] + rows[:cut])
    for i, (n, w, a) in order:
        if a and n < w and (best is None or (weigh[i], n) < (weigh[best], inflight[best])):
            best = i
    return best


def auto_window(rtt_s: float, service_s: float, lo: int = 1, hi: int = 64) -> int:
    """async-demand(auto): enough calls in flight to cover a round trip, about
    1 + rtt/service, so a replica never idles waiting for its next call."""
    if service_s <= 0:
        return hi
    return max(lo, min(hi, 1 + int(rtt_s / service_s + 0.999)))


class WindowEstimator:
    """async-demand(auto) for one replica: estimates its service time and the round
    trip from answers as they come, and gives the window `auto_window` makes of them.

    service: the gap between an answer and the later of its send and the previous
    answer (while calls queue back to back, the replica's time for one call).
    round trip: a call's time in the system less the service of the calls ahead of it
    and its own. Both are smoothed (EWMA) so one outlier moves the window little.
    """

    def __init__(self, initial: int = 2, alpha: float = 0.2) -> None:
        self.window = initial
        self.alpha = alpha
        self.service_s: float | None = None
        self.rtt_s: float | None = None
        self._last_done = 0.0

    def observe(self, sent_at: float, ahead: int, done_at: float) -> int:
        """``ahead``: calls outstanding on the replica when this one was sent, itself included."""
        service = done_at - max(sent_at, self._last_done)
        self._last_done = done_at
        a = self.alpha
        self.service_s = service if self.service_s is None else (1 - a) * self.service_s + a * service
        rtt = max(0.0, (done_at - sent_at) - ahead * self.service_s)
        self.rtt_s = rtt if self.rtt_s is None else (1 - a) * self.rtt_s + a * rtt
        self.window = auto_window(self.rtt_s, self.service_s)
        return self.window
