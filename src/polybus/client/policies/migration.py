"""Task migration between replicas (seeds/001 §3.2.3). Pure: a snapshot in, moves out.

The configuration gives migration paths ``a#b`` (both directions) with an overload
condition on the sending end (sender-initiated) and/or an underload condition on the
receiving end (receiver-initiated), and the fraction of waiting calls that moves.
`edges` turns them into directed edges; `decide` looks at one snapshot of the replicas'
loads and says which calls to take back from whom and give to whom.

Two rules keep migration from doing harm, whatever the conditions say:
- at most one steal per replica is in flight, and calls already on their way to a
  replica count as its load (no two receivers grab the same surplus);
- a call moves only if the receiver would finish it sooner than the sender: the moved
  count is capped so the receiver's estimated drain time stays below the sender's
  (drain time = (waiting + running) / speed). On balanced load nothing moves.

A condition may compare a replica's load with global load information (``load>=mean+2``,
``load<=min``): `load_names` computes the names once per decision from the snapshot, over
its live replicas only, and ``peer`` is the load of the other end of the edge judged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from polybus.config.model import Condition, MigrationPath, ReplicaSpec

__all__ = ["DEFAULT_UNDERLOAD", "Edge", "Move", "ReplicaLoad", "decide", "edges", "load_names",
           "steal_edges"]

#: the underload condition used when a path names none on either end: pull when idle
DEFAULT_UNDERLOAD = Condition("==", 0)


@dataclass(frozen=True)
class ReplicaLoad:
    """What the client knows of one replica, for one interface."""

    waiting: int              # calls queued there, not yet started (estimated)
    running: int = 0          # calls being run there (estimated)
    incoming: int = 0         # calls being migrated to it (steal asked, not yet released)
    speed: float = 1.0        # relative speed (configured or measured); only ratios matter
    stealing: bool = False    # a steal from this replica is unanswered
    alive: bool = True

    @property
    def load(self) -> int:
        """The ``load`` of conditions: calls waiting there or on their way there."""
        return self.waiting + self.incoming


@dataclass(frozen=True)
class Edge:
    """Calls may move from ``src`` to ``dst`` when ``push`` holds for src's load
    (sender-initiated) or ``pull`` holds for dst's load (receiver-initiated)."""

    src: str
    dst: str
    fraction: float = 0.5
    push: Condition | None = None
    pull: Condition | None = None


@dataclass(frozen=True)
class Move:
    """Take back up to ``n`` waiting calls from ``src`` and send them to ``dst``."""

    src: str
    dst: str
    n: int


def edges(paths: Sequence[MigrationPath], replicas: Sequence[ReplicaSpec]) -> list[Edge]:
    """Directed edges (both ways) of configured paths. A path whose ends name no
    condition at all gets receiver-initiated pulling when idle (``uc=(load==0)``)."""
    spec = {r.name: r for r in replicas}
    out: list[Edge] = []
    for p in paths:
        a, b = spec.get(p.a), spec.get(p.b)
        oc = {p.a: a.overload if a else None, p.b: b.overload if b else None}
        uc = {p.a: a.underload if a else None, p.b: b.underload if b else None}
        if not any((*oc.values(), *uc.values())):
            uc = {p.a: DEFAULT_UNDERLOAD, p.b: DEFAULT_UNDERLOAD}
        for s, d in ((p.a, p.b), (p.b, p.a)):
            if oc[s] is not None or uc[d] is not None:
                out.append(Edge(s, d, p.fraction, oc[s], uc[d]))
    return out


def steal_edges(names: Sequence[str], fraction: float = 0.5) -> list[Edge]:
    """``balance = "steal"``: every replica pulls from every other when it is idle."""
    return [Edge(s, d, fraction, None, DEFAULT_UNDERLOAD)
            for d in names for s in names if s != d]


def _drain(w: int, r: int, speed: float) -> float:
    return (w + r) / speed


def _helpful(src: ReplicaLoad, dst: ReplicaLoad, k: int) -> int:
    """How many of ``src``'s waiting calls (at most k) to move to ``dst``: the fewest
    that make the later of the two done soonest, 0 when no move makes it sooner.

    With S calls at src and D at dst (running and waiting, dst's incoming too), moving
    m makes them done at (S - m)/ss and (D + m)/sd: the later of those falls until m
    reaches (sd*S - ss*D)/(ss + sd), and rises after. One call waiting behind a running
    one moves to an idle replica (both then done at 1, where src alone was at 2); the
    rule this replaced wanted dst done strictly sooner than src after the move, and
    left that call waiting."""
    big_s = src.waiting + src.running
    big_d = dst.waiting + dst.incoming + dst.running
    ss, sd = src.speed, dst.speed
    cap = min(k, src.waiting)

    def later(m: int) -> float:
        return max((big_s - m) / ss, (big_d + m) / sd)

    turn = math.floor((sd * big_s - ss * big_d) / (ss + sd))
    best, done = 0, later(0)
    for m in (turn, turn + 1):
        m = min(cap, max(0, m))
        if later(m) < done - 1e-12 or (m < best and later(m) <= done + 1e-12):
            best, done = m, later(m)
    return best


def load_names(loads: Mapping[str, ReplicaLoad]) -> dict[str, float]:
    """The global load information a condition may name, from one snapshot: ``mean``,
    ``min``, ``max`` and ``total`` of the ``load`` (waiting and incoming calls, as in
    conditions) of its live replicas, the replica judged among them (``mean`` is their
    total over their count, unrounded and unweighted by speed). Empty when none is live.
    (``peer`` is per edge: `decide` adds it.)"""
    live = [r.load for r in loads.values() if r.alive]
    if not live:
        return {}
    return {"mean": sum(live) / len(live), "min": min(live), "max": max(live),
            "total": sum(live)}


def _holds(c: Condition | None, load: int, names: dict[str, float], peer: int) -> bool:
    """Whether ``c`` holds for ``load``, the other end of the edge having ``peer``."""
    if c is None:
        return False
    return c.holds(load) if c.name is None else c.holds(load, {**names, "peer": peer})


def decide(loads: Mapping[str, ReplicaLoad], rules: Sequence[Edge]) -> list[Move]:
    """The steals to make now: at most one per sending replica, most helpful first.
    A speed that is no positive number (a replica registered one) counts as 1."""
    state = {k: r if r.speed > 0 and math.isfinite(r.speed) else replace(r, speed=1.0)
             for k, r in loads.items()}
    names = load_names(loads)  # (once per decision, as every condition sees the snapshot)
    candidates: list[tuple[float, int, Edge]] = []
    for i, e in enumerate(rules):
        s, d = state.get(e.src), state.get(e.dst)
        if s is None or d is None or not (s.alive and d.alive) or s.stealing or s.waiting <= 0:
            continue
        if _holds(e.push, s.load, names, d.load) or _holds(e.pull, d.load, names, s.load):
            gain = _drain(s.waiting, s.running, s.speed) - _drain(d.load, d.running, d.speed)
            candidates.append((-gain, i, e))
    moves: list[Move] = []
    for _, _, e in sorted(candidates):
        s, d = state[e.src], state[e.dst]
        if s.stealing:
            continue
        k = _helpful(s, d, max(1, math.ceil(e.fraction * s.waiting)))
        if k <= 0:
            continue
        moves.append(Move(e.src, e.dst, k))
        state[e.src] = ReplicaLoad(s.waiting - k, s.running, s.incoming, s.speed, True, s.alive)
        state[e.dst] = ReplicaLoad(d.waiting, d.running, d.incoming + k, d.speed, d.stealing,
                                   d.alive)
    return moves
