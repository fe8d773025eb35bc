"""The name server's state (seeds/002), pure: no sockets, time passed in.

Workers register the interfaces they serve; clients resolve a module or an interface
to its replicas; a replica not heard from for ``ttl`` seconds is dropped. A name is
held by one live registration at a time: a second worker asking for a name that is
alive is refused, so two workers never hold one name. A client that asks for a turn
(``take_turn``) is told how many clients took one before it for the same module: the
name server's round robin, by which clients sharing a registry start their calls at
different replicas. Its counters are kept for what live replicas serve alone, so a
peer asking about names no one registered grows nothing; and one connection holds at
most ``per_connection`` registrations (limits.REGISTRATIONS_MAX), so what it registers
is bounded too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from polybus.registry.limits import REGISTRATIONS_MAX
from polybus.wire.messages import Replica


@dataclass
class _Entry:
    replica: Replica
    owner: int          # the connection that registered it
    last_seen: float


@dataclass
class RegistryState:
    ttl: float = 3.0
    # Told of each replica `expire` drops, with how long it had been silent
    on_drop: Callable[[Replica, float], None] | None = None
    per_connection: int = REGISTRATIONS_MAX  # registrations one owner may hold
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _turns: dict[tuple[str, str], int] = field(default_factory=dict)

    def register(self, replica: Replica, owner: int, now: float) -> str | None:
        """None if accepted, else why not."""
        self.expire(now)
        if not 0 < replica.speed <= 1:  # (a NaN too) clients balance by it: taken whole
            return (f"its speed {replica.speed!r} is out of range (0 < speed <= 1, as "
                    "a configuration's speed=)")
        old = self._entries.get(replica.name)
        if old is not None and old.owner != owner:
            return (f"the name {replica.name!r} is held by a live replica at "
                    f"{old.replica.address}; give this one another name (--name)")
        if old is None and (held := self.held(owner)) >= self.per_connection:
            return (f"this connection holds {held:,} registration{'s' * (held != 1)}, the "
                    f"registry's limit for one connection ({self.per_connection:,}); "
                    "those it holds stay (a worker registers its one replica over its "
                    "own connection)")
        self._entries[replica.name] = _Entry(replica, owner, now)
        if old is not None:  # (registered again: it may serve other interfaces now)
            self._forget_turns()
        return None

    def heartbeat(self, name: str, owner: int, now: float) -> bool:
        entry = self._entries.get(name)
        if entry is None or entry.owner != owner:
            return False
        entry.last_seen = now
        return True

    def unregister(self, name: str, owner: int) -> None:
        entry = self._entries.get(name)
        if entry is not None and entry.owner == owner:
            del self._entries[name]
            self._forget_turns()

    def drop_owner(self, owner: int) -> list[str]:
        """A connection closed: its registrations go with it."""
        gone = [n for n, e in self._entries.items() if e.owner == owner]
        for n in gone:
            del self._entries[n]
        if gone:
            self._forget_turns()
        return gone

    def expire(self, now: float) -> list[str]:
        gone = [n for n, e in self._entries.items() if now - e.last_seen > self.ttl]
        for n in gone:
            entry = self._entries.pop(n)
            if self.on_drop is not None:
                self.on_drop(entry.replica, now - entry.last_seen)
        if gone:
            self._forget_turns()
        return gone

    def held(self, owner: int) -> int:
        """How many replicas connection ``owner`` holds registered."""
        return sum(e.owner == owner for e in self._entries.values())

    def owned(self, owner: int) -> list[Replica]:
        """The replicas registered on connection ``owner``."""
        return [e.replica for e in self._entries.values() if e.owner == owner]

    def resolve(self, *, module: str = "", interface: str = "", now: float) -> list[Replica]:
        """Live replicas of ``module`` and/or serving ``interface``, in name order."""
        self.expire(now)
        out = [e.replica for e in self._entries.values() if _serves(e.replica, module, interface)]
        return sorted(out, key=lambda r: natural(r.name))

    def take_turn(self, *, module: str = "", interface: str = "") -> int:
        """The turns taken before this one for ``module`` and ``interface`` (0 for the
        first client to ask): a client starts its rotation there. Counted only while
        some live replica serves them (a client finding none has no rotation to start),
        and forgotten once none does (`_forget_turns`): the counters held are of names
        registered, not of every name a peer asks about."""
        if not any(_serves(e.replica, module, interface) for e in self._entries.values()):
            return 0
        key = (module, interface)
        turn = self._turns.get(key, 0)
        self._turns[key] = turn + 1
        return turn

    def turns_held(self) -> int:
        """How many (module, interface) rotations are counted."""
        return len(self._turns)

    def _forget_turns(self) -> None:
        """Drop the counters of the modules and interfaces no live replica serves."""
        if self._turns:
            self._turns = {k: n for k, n in self._turns.items()
                           if any(_serves(e.replica, *k) for e in self._entries.values())}

    def names(self) -> list[str]:
        return sorted(self._entries)


def _serves(r: Replica, module: str, interface: str) -> bool:
    """Whether ``r`` answers a resolve of ``module`` and ``interface`` ("": any)."""
    return (not module or r.module == module) and (not interface or interface in r.interfaces)


def natural(name: str) -> tuple[str, int, str]:
    """A replica name's place in name order: ``server-2`` before ``server-10`` (the
    name itself last, so that ``server-02`` and ``server-2`` keep one order)."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1, name)
