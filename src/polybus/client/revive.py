"""A long-lived session's lost replicas, dialled again (the HTTP front door's).

A session made for one run keeps the replicas it dialled at its start, and one it
loses stays lost (reliability.md). The front door's session lives on, so the places of
its lost replicas are filled again: `wanted` says what a module's links lack, `dial`
asks the registry which replicas of the module are registered now and dials those the
session has no live link to (a replica taken for dead whose process was alive, which
registers again when it answers again; or a replacement started meanwhile), and
`install` puts each in the place of a lost link of that module, in every dispatcher that
used it. A session never holds more links to a module than it dialled at its start.

`dial` blocks (the registry, a handshake) and is run off the thread that drives the
session; it touches no session state. `wanted` and `install` run on that thread.
A migrator (``balance = "steal"``, migration paths) is told of each new link and moves
calls along the lost one's edges (`Migrator.replace`); an aggregating binding's Batcher
takes it in the lost one's place, its counts there afresh (client/batchrefill.py). The
new replica holds none of the session's cached operands, whatever its name: they are
Put to it again (`Known.forget`), not named.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from polybus.client import batchrefill
from polybus.client.calls import ReplicaLink
from polybus.client.dialing import connect_replica, tune
from polybus.client.naming import forget
from polybus.client.stats import first_stats, link_bytes
from polybus.errors import PolybusError
from polybus.registry.client import RegistryClient
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica, Stats

if TYPE_CHECKING:
    from polybus.client.batching import Batcher
    from polybus.client.session import Session

__all__ = ["KEPT_BEFORE", "LOOK_MAX_S", "LOOK_S", "WAIT_S", "Found", "Halt", "Wanted",
           "back_line", "dial", "follow", "install", "key_of", "wanted"]

log = logging.getLogger("polybus.client")

# How lost replicas are looked for (http/revival.py, client/rejoin.py):
LOOK_S = 0.5        # the first look after a loss; and the closest two looks may be
LOOK_MAX_S = 10.0   # the farthest apart looks get while a place stays empty
WAIT_S = 5.0        # the longest a call with no live replica waits for the looks
KEPT_BEFORE = 64    # lost links a place keeps behind its link, for the figures (stats.py)


@dataclass(frozen=True)
class Wanted:
    """What one group of a session's links (``Session.links[key]``) lacks."""

    key: str
    module: str
    scheme: str
    live: frozenset[str]      # names with a live link: not dialled again
    lost: tuple[str, ...]     # names of the lost links, whose places are free
    registry: str
    token: bytes
    allow_pickle: bool
    max_frame: int


@dataclass
class Found:
    replica: Replica
    channel: Channel
    # Its counters when dialled: the run's figures are the difference (client/stats.py;
    # a process taken for dead and back counted on meanwhile). None: not answered.
    base: Stats | None = None


def key_of(session: Session, link: ReplicaLink) -> str | None:
    """The key of the group of ``session``'s links that holds ``link``."""
    for key, links in session.links.items():
        if any(lk is link for lk in links):
            return key
    return None


def wanted(session: Session, key: str) -> Wanted | None:
    """What the links of ``key`` lack, or None: none lost."""
    links = session.links.get(key)
    if not links or not any(lk.dead for lk in links):
        return None
    module = links[0].module
    spec = session.app.modules[module]
    scheme = key.partition("@")[2] or spec.transport
    return Wanted(key, module, scheme, frozenset(lk.name for lk in links if not lk.dead),
                  tuple(lk.name for lk in links if lk.dead), session.registry.address,
                  session.token, spec.pickle, session.app.cluster.max_frame)


class Halt:
    """Ends the looks of a session that closes (`dial`), from another thread: a wait for
    the registry's answer, or for a replica's counters (`first_stats`), is cut short,
    and nothing is dialled after. (A handshake under way with a replica ends within its
    own bound, HANDSHAKE_TIMEOUT.)"""

    def __init__(self) -> None:
        self.halted = False
        self._client: RegistryClient | None = None  # (the registry's, of the look under way)

    def halt(self) -> None:
        self.halted = True
        client = self._client
        if client is not None:
            client.interrupt()

    def asking(self, client: RegistryClient | None) -> None:
        """``client`` is the one the look asks now (None: asked)."""
        self._client = client
        if client is not None and self.halted:  # (halted before it was seen)
            client.interrupt()


def dial(w: Wanted, halt: Halt | None = None) -> tuple[list[Found], list[str]]:
    """The replicas of ``w.module`` registered now that have no live link, dialled (at
    most one per lost place; those of the lost names first), and why any could not be.
    Blocking; raises PolybusError if the registry cannot be asked. ``halt``: what ends
    it from another thread (a session closing)."""
    client = RegistryClient(w.registry, w.token)
    if halt is not None:
        halt.asking(client)
    try:
        replicas = client.resolve(module=w.module)
    finally:
        if halt is not None:
            halt.asking(None)
        client.close()
    candidates = sorted((r for r in replicas if r.name not in w.live),
                        key=lambda r: (r.name not in w.lost, r.name))
    found: list[Found] = []
    failed: list[str] = []
    for r in candidates:
        if len(found) == len(w.lost) or (halt is not None and halt.halted):
            break
        codec = Codec(allow_pickle=w.allow_pickle, max_frame=w.max_frame)
        try:
            ch = connect_replica(r, w.scheme, w.token, codec)
            found.append(Found(r, ch, first_stats(ch, halted=(
                None if halt is None else lambda: halt.halted))))
        except PolybusError as exc:
            failed.append(f"{r.name}: {exc}")
    return found, failed


def install(session: Session, key: str, found: list[Found],
            busy: list[Found] | None = None) -> list[ReplicaLink]:
    """Put each of ``found`` in the place of a lost link of ``key`` (its own old place if
    it had one), in the reactor and in every dispatcher using that link; the new links.
    A replica that does not serve every interface bound to the place is left out (a
    worker of another program registered under the module's key), said once.

    An aggregating binding's link changes under its Batcher's lock, from the first
    change (its dispatcher's list, which the Batcher shares) to the last (its counts
    there): a batch placed meanwhile on another thread (the linger timer, a read's
    flush, the pump) would go to the new link with the lost one's counts, then lose
    its place in them. The lock is only tried: its holder may be waiting for this
    thread (a read's after-step, or the pump's turn); one found while a lock is held
    elsewhere is left in ``busy``, to be put in place later (closed if None)."""
    links = session.links.get(key, [])
    made: list[ReplicaLink] = []
    for f in found:
        locked = _lock(session, links, f.replica.name)
        if locked is None:
            if busy is not None:
                busy.append(f)
            else:
                f.channel.close()
            continue
        try:
            new = _put(session, links, f)
        finally:
            for bt in locked:
                bt.lock.release()
        if new is not None:
            made.append(new)
    return made


def _lock(session: Session, links: list[ReplicaLink], name: str) -> list[Batcher] | None:
    """The locks of the Batchers that use the place ``name`` takes (its own lost link's,
    else the first lost one's, as `_put` chooses), each tried and taken; None if one is
    held on another thread (none kept then)."""
    dead = [lk for lk in links if lk.dead]
    old = next((lk for lk in dead if lk.name == name), dead[0] if dead else None)
    if old is None:
        return []
    locked: list[Batcher] = []
    for bt in session.batchers:
        if id(old) in bt.d._index:
            if not bt.lock.acquire(blocking=False):
                for held in locked:
                    held.lock.release()
                return None
            locked.append(bt)
    return locked


def _put(session: Session, links: list[ReplicaLink], f: Found) -> ReplicaLink | None:
    """(`install`, the Batchers' locks held) ``f`` in a lost link's place; None if it
    is not used (and closed)."""
    r = f.replica
    dead = [i for i, lk in enumerate(links) if lk.dead]  # (as `_lock` chose)
    if not dead or any(lk.name == r.name and not lk.dead for lk in links):
        f.channel.close()
        return None
    i = next((j for j in dead if links[j].name == r.name), dead[0])
    old = links[i]
    users = [d for d in session.dispatchers.values() if id(old) in d._index]
    missing = [d.interface for d in users if d.interface not in r.interfaces]
    if missing:
        f.channel.close()
        if f"unfit {r.name}" not in session._short:
            session._short.add(f"unfit {r.name}")
            log.warning("polybus: warning: replica %s registered for module %r does not "
                        "serve %s; not used", r.name, old.module, ", ".join(missing))
        return None
    tune(f.channel, session.app.modules[old.module])
    # (its next loss is said again: client/lossline.py; its coming back said once, not
    # once more for a binding's other transport dialled again after; and its dialling
    # known before any read can find it lost: then its loss is not taken for an earlier's)
    back = session.losses.again(r.name)
    if old.name != r.name:  # (another worker in a lost one's place: said of that loss)
        back = session.losses.again(old.name, itself=False) or back
    new = ReplicaLink(r.name, old.module, f.channel, r.speed, session.losses.dialling(r.name))
    new.back = back
    follow(new, old)
    session._base[id(new)] = f.base  # (this run's figures from here: client/stats.py)
    session._bytes0[id(new)] = link_bytes(new)
    reactor = session.reactor
    reactor.links = [lk for lk in reactor.links if lk is not old]
    reactor._rings[:] = [(lk, ch) for lk, ch in reactor._rings if lk is not old]
    reactor.add(new)
    links[i] = new
    forget(session, r.name)  # (its cache holds nothing this session put)
    for d in users:
        d.replace(old, new)
    for bt in session.batchers:  # (after its dispatcher's: they share d.links)
        if any(bt.d is d for d in users):
            batchrefill.replace(bt, old, new)
    for m in session.migrators:  # (after its dispatcher's: it reads d.links)
        if any(m.d is d for d in users):
            m.replace(old, new)
    session._serves[r.name] = list(r.interfaces)
    return new


def follow(new: ReplicaLink, old: ReplicaLink) -> None:
    """``new`` takes ``old``'s place: ``old`` is kept behind it, for the run's figures
    (each process that served the run its row: stats.py), with at most KEPT_BEFORE
    lost links behind a place (a serve whose worker fails again and again)."""
    new.before = old
    kept, lk = 1, old
    while lk.before is not None and kept < KEPT_BEFORE:
        kept, lk = kept + 1, lk.before
    lk.before = None


def back_line(new: ReplicaLink) -> str:
    """What is said when ``new`` (`install`'s) is dialled in a lost link's place: "is
    back" for a worker under the lost one's name; another worker is said as taking the
    lost one's place (a worker started by hand under a name of its own read as if the
    lost process had come back)."""
    old = new.before
    if old is None or old.name == new.name:
        return f"replica {new.name} of module {new.module!r} is back: dialled again"
    return (f"replica {new.name} of module {new.module!r} takes the place of lost "
            f"replica {old.name}: dialled")
