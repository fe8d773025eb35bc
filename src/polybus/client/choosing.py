"""Which of a module's registered replicas a session uses, and in which places.

Workers started by hand (`run --registry`, `serve --registry`) may be more than the
module's ``replication``; the run uses ``replication`` of them, so that a load ratio's
shares, the migration paths and the replica names line up with the configuration (it
used every one registered, and a load ratio of fewer shares than replicas failed every
call with an IndexError). Each place the configuration makes (``server-0`` ..
``server-{n-1}`` for a count, or the names it lists) takes the replica registered under
its name; a place whose name is not registered takes one of the others, by name. Those
left over are spares: `dial_places` dials one in the place of a replica that cannot be
reached, and the session says which it left unused. Fewer registered than the places
leave the empty places out, the others keeping the configuration's order (the session
warns, and runs with those found). At a registry other clients share, a count with no
load ratio or migration path fills its places from the client's turn instead (`places`);
names never do, even the names a count would make (``replication = "server-0"`` is
server-0, where ``replication = 1`` is whichever the turn gives).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from polybus.errors import ConfigError, TransportError
from polybus.registry.state import natural
from polybus.transport.channel import Channel
from polybus.wire.messages import Replica

__all__ = ["check_shares", "choose", "dial_places", "places", "replication_text"]


def choose(configured: Sequence[str], replicas: Sequence[Replica]
           ) -> tuple[list[Replica], list[Replica]]:
    """The replicas to dial in the places named ``configured`` (at most one each, in
    that order), and the spares, by name. No places (none configured): every replica."""
    if not configured:
        return sorted(replicas, key=lambda r: r.name), []
    by_name: dict[str, Replica] = {}
    for r in replicas:
        by_name.setdefault(r.name, r)
    places: list[Replica | None] = [by_name.get(n) for n in dict.fromkeys(configured)]
    taken = {id(r) for r in places if r is not None}
    others = iter(sorted((r for r in replicas if id(r) not in taken), key=lambda r: r.name))
    for i, at in enumerate(places):
        if at is None:
            places[i] = next(others, None)
    return [r for r in places if r is not None], list(others)


def places(module: str, configured: Sequence[str], replicas: Sequence[Replica],
           turn: int | None, named: bool = False) -> tuple[list[Replica], list[Replica], int]:
    """`choose`, for a client that took ``turn`` at a registry other clients share (None:
    a run's own registry), with where its rotation starts among those chosen. Where the
    replication is a count (places named ``module-0`` ... by default, nothing tied to a
    name: ``named`` says something is: the replication was given as names, whatever
    they are, or a load ratio's shares or migration paths follow them), and more
    replicas are registered than the count, the places are filled from the turn on:
    turn t takes the count's replicas from position t x count of all those registered,
    in name order, round the end (the name server's round robin: clients of one replica
    each spread over the replicas, not all at the first); its rotation then starts at
    the first of them. Otherwise the places are `choose`'s, and the rotation starts at
    the turn (0 without one)."""
    k, m = len(configured), len(replicas)
    if (turn is None or named or not k or m <= k
            or list(configured) != [f"{module}-{i}" for i in range(k)]):  # (names)
        chosen, spares = choose(configured, replicas)
        return chosen, spares, turn or 0
    ordered = sorted(replicas, key=lambda r: natural(r.name))  # (as the registry)
    first = (turn * k) % m
    ordered = ordered[first:] + ordered[:first]
    return ordered[:k], ordered[k:], 0


Dial = Callable[[list[Replica]], list[Channel | TransportError]]


def dial_places(chosen: Sequence[Replica], spares: Sequence[Replica], dial: Dial
                ) -> tuple[list[tuple[Replica, Channel]], list[tuple[Replica, TransportError]]]:
    """Each of ``chosen`` dialled (``dial`` takes a list, and gives a channel or why not,
    each in order): a place whose replica cannot be reached is given the next spare,
    dialled in turn, until one answers or none is left. The replicas reached, in their
    places (a place none filled left out), and those that could not be. An error other
    than a TransportError closes the channels made and is raised."""
    placed: list[tuple[Replica, Channel] | None] = [None] * len(chosen)
    failed: list[tuple[Replica, TransportError]] = []
    spare = iter(spares)
    todo = list(enumerate(chosen))
    try:
        while todo:
            again: list[tuple[int, Replica]] = []
            outcomes = dial([r for _, r in todo])
            for (i, r), outcome in zip(todo, outcomes, strict=True):
                if isinstance(outcome, TransportError):
                    failed.append((r, outcome))
                    nxt = next(spare, None)
                    if nxt is not None:
                        again.append((i, nxt))
                else:
                    placed[i] = (r, outcome)
            todo = again
    except BaseException:
        for p in placed:
            if p is not None:
                p[1].close()
        raise
    return [p for p in placed if p is not None], failed


def replication_text(configured: Sequence[str], named: bool) -> str:
    """``replication`` as it was written: names (``named``), quoted, or a count."""
    return '"' + ",".join(configured) + '"' if named else str(len(configured))


def check_shares(loadratio: Sequence[float] | None, replicas: Sequence[str], module: str,
                 interface: str, key: str, file: str) -> None:
    """A load ratio with fewer shares than the replicas a binding was given has none for
    the last of them: a ConfigError at the session's start, not an IndexError at a call.
    (The configuration's check makes the shares as many as the replication, and a
    session dials no more; fewer replicas found than configured take the first shares.)"""
    if loadratio is None or len(loadratio) >= len(replicas):
        return
    raise ConfigError(
        f"the load ratio has {len(loadratio)} shares but {len(replicas)} replicas of "
        f"module {module!r} serve {interface!r} ({', '.join(replicas)})", file=file, key=key,
        hint="give it one share per replica")
