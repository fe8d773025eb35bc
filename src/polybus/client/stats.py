"""A client session's figures for its run: calls, bytes, and each replica's share.

`Session.stats` (client/session.py) asks each replica for its counters (``Stats``) and
gives this run's figures: the difference from what they were when the session began,
as a replica's counters run for its whole life (it may have served other runs, as
workers started by hand do). Bytes are what the session's connections carried, over
shm with what went by segment. The runner prints them (runner.py), the balance
benchmark reads them (bench/_balance.py).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from polybus.client.counts import interfaces
from polybus.errors import PolybusError
from polybus.plural import plural
from polybus.wire.messages import Stats, StatsRequest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from polybus.client.calls import ReplicaLink
    from polybus.client.reactor import Reactor
    from polybus.client.session import Session
    from polybus.transport.channel import Channel

__all__ = ["ReplicaStats", "SessionStats", "ask_stats", "busy_at_start", "first_stats",
           "link_bytes", "session_stats"]

_reqs = itertools.count(1)
STATS_WAIT_S = 2.0  # how long a replica just dialled is waited for (`first_stats`)
HALT_LOOK_S = 0.05  # how often that wait looks whether its session closes
BUSY_LOOK_S = 0.05  # a replica busy as a run begins is looked at again after this


@dataclass
class ReplicaStats:
    name: str
    calls: int = 0
    # The replica's own counters for the run; None for one that could not be asked (lost
    # during the run, or gave no answer): not known, not 0
    busy_s: float | None = 0.0
    queue_wait_s: float | None = 0.0
    speed: float = 1.0
    migrated_in: int = 0
    migrated_out: int = 0
    # busy_s / (the run's elapsed time x handlers), filled in by the runner: the share of
    # its handlers' time spent in calls (busy_s sums calls that ran at once in a pool);
    # None with busy_s
    busy_fraction: float | None = 0.0
    handlers: int = 1  # calls the replica can run at once (its pool)
    lost: bool = False  # gone during the run (its connections broke): its figures stop there
    # How this client reached it: the scheme of each of its connections ("tcp", "ipc",
    # "shm"), one per transport its bindings use, so a transport switch can be seen
    transports: list[str] = field(default_factory=list)
    # Where: the address each of those connections dialled, in the same order
    # ("tcp://10.0.0.6:40113", "shm:///tmp/polybus-.../1.shm"), so that workers started
    # by hand on several hosts can be told apart (the summary's `host`: summary.py). An
    # ipc or shm address is a socket file on this host that exists only while its
    # replica serves (a run's own workers': removed with the run's directory), kept all
    # the same: it says the transport and that the replica was here (docs/guide.md, --json)
    addresses: list[str] = field(default_factory=list)
    # The module it serves ("server"): a sweep counts the replicas each module's runs
    # found (fewer than its replication asks for, at a registry) by it
    module: str = ""


@dataclass
class SessionStats:
    calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    replicas: list[ReplicaStats] = field(default_factory=list)
    # What each binding's strategies did (client/counts.py), and `broadcast`'s
    interfaces: dict[str, dict[str, int]] = field(default_factory=dict)
    broadcasts: dict[str, int] = field(default_factory=dict)
    # Modules with replication = 0 -> the calls made to them in the client (inclient.py)
    in_client: dict[str, int] = field(default_factory=dict)


def link_bytes(link: ReplicaLink) -> tuple[int, int]:
    """What ``link``'s connection has sent and received, over shm with what went by
    segment (shmseg.py)."""
    ch = link.channel
    return (ch.bytes_sent + getattr(ch, "shm_bytes_sent", 0)
            - getattr(ch, "shm_overhead_sent", 0),
            ch.bytes_received + getattr(ch, "shm_bytes_received", 0)
            - getattr(ch, "shm_overhead_received", 0))


def first_stats(ch: Channel, seconds: float = STATS_WAIT_S,
                halted: Callable[[], bool] | None = None) -> Stats | None:
    """The counters of the replica at the end of ``ch``, a connection just dialled that
    nothing else uses yet (client/revive.py: a replica taken back, whose counters ran on
    while it was taken for dead), or None if it does not answer within ``seconds``, or
    once ``halted()`` (its session closes: revive.py's `Halt`; looked at every
    HALT_LOOK_S). The thread sleeps on the connection meanwhile (`wait_readable`)."""
    req = next(_reqs)
    deadline = time.monotonic() + seconds
    try:
        ch.send(StatsRequest(req))
        while True:
            while (msg := ch.next_message()) is not None:
                if type(msg) is Stats and msg.req == req:
                    return msg
            left = deadline - time.monotonic()
            if left <= 0 or (halted is not None and halted()):
                return None
            # Asleep until the answer comes (a replica that never answers costs no CPU
            # for the wait), looking at ``halted`` between naps.
            if ch.wait_readable(min(left, HALT_LOOK_S)):
                ch.fill(wait=False)
    except PolybusError:  # (gone again: found by the reactor once the link is in place)
        return None


def ask_stats(reactor: Reactor, link: ReplicaLink) -> Stats | None:
    """``link``'s replica's counters (a ``Stats``), or None if it is gone or does not
    answer."""
    if link.dead:
        return None
    req = next(_reqs)
    reply = reactor.request(link, StatsRequest(req), req)
    return reply if isinstance(reply, Stats) else None


def busy_at_start(session: Session) -> str | None:
    """The warning for replicas of a shared registry that were running or holding calls
    as ``session``'s run began (its counters then, ``session._base``): another client's,
    or those a run left when it failed, timed out or was interrupted, which run to their
    end on workers started by hand. The run's calls wait behind them and its time counts
    that wait, which nothing else would say (a sweep's next combination timed out behind
    them, as if its own calls hung). Asked again after BUSY_LOOK_S, a replica said only if
    busy both times: one counts a call it has just answered as running a moment longer.
    None when every replica was idle."""
    if _busy(session._base.values()) is None:
        return None
    time.sleep(BUSY_LOOK_S)
    busy = _busy(ask_stats(session.reactor, lk) for links in session.links.values()
                 for lk in links)
    if busy is None:
        return None
    return (f"polybus: warning: {'replica' if len(busy) == 1 else 'replicas'} "
            f"{', '.join(f'{n} ({what})' for n, what in busy.items())} "
            f"{'was' if len(busy) == 1 else 'were'} busy as this run began (another "
            f"client's calls, or those a run left when it failed, timed out or was "
            f"interrupted, which run to their end): this run's calls wait behind them, "
            f"and its time counts that wait")


def _busy(stats: Iterable[Stats | None]) -> dict[str, str] | None:
    """Each busy replica's name and what it was doing ("1 call running, 2 queued"), a
    replica once however many connections reach it; None for none."""
    busy: dict[str, str] = {}
    for st in stats:
        if st is not None and (st.running or st.queued) and st.name not in busy:
            busy[st.name] = ", ".join(
                [*([plural(st.running, "call") + " running"] if st.running else []),
                 *([f"{st.queued} queued"] if st.queued else [])])
    return busy or None


def session_stats(session: Session) -> SessionStats:
    """``session``'s figures for its run so far (`Session.stats`): each replica's counters
    less what they were when the session began."""
    local = session.local.values()
    out = SessionStats(calls=sum(d.calls for d in session.dispatchers.values())
                       + sum(e.calls for e in local), interfaces=interfaces(session),
                       broadcasts={"values": session.broadcasts.values,
                                   "puts": session.broadcasts.puts})
    # One row per replica: a binding with a transport of its own has connections of
    # its own to the same replicas, whose counters must not be shown twice.
    rows: dict[str, ReplicaStats] = {}
    answered: set[str] = set()
    for links in session.links.values():
        for link in links:
            rs, new = _row(session, rows, link.name, link, out)
            if new:
                for m in session.migrators:
                    rs.migrated_in += m.moved_in.get(link.name, 0)
                    rs.migrated_out += m.moved_out.get(link.name, 0)
            if link.name in answered:
                continue
            rs.calls += link.calls
            reply = ask_stats(session.reactor, link)
            # (a replica taken back whose counters were not read as it was: its own
            # would count the calls it answered before, in its lost row too; this
            # client's count of its answers stands, its times are not known)
            unknown = link.before is not None and session._base.get(id(link)) is None
            if reply is not None and not unknown:  # (the replica's: other clients' count)
                answered.add(link.name)
                base = session._base.get(id(link)) or Stats(link.name, 0, 0.0, 0.0, 0, 0)
                rs.calls = reply.calls - base.calls
                rs.busy_s = reply.busy_s - base.busy_s
                rs.queue_wait_s = reply.queue_wait_s - base.queue_wait_s
                rs.handlers = max(1, reply.handlers)
    _replaced(session, rows, out)
    # (looked at again: a replica killed as the run ended is found gone by the asking
    # above, its connections breaking under it; it was counted alive before)
    alive = {link.name for links in session.links.values() for link in links if not link.dead}
    for key, rs in rows.items():
        rs.lost = rs.lost or rs.name not in alive  # (a row of `_replaced`'s: lost already)
        # (not asked, no answer, or a process since replaced: its times are not known)
        if key != rs.name or rs.name not in answered:
            rs.busy_s = rs.queue_wait_s = rs.busy_fraction = None
    out.replicas = list(rows.values())
    for e in local:  # (no replica: their calls counted here, client/inclient.py)
        out.in_client[e.module] = out.in_client.get(e.module, 0) + e.calls
    return out


def _replaced(session: Session, rows: dict[str, ReplicaStats], out: SessionStats) -> None:
    """The rows of the lost replicas whose places were taken during the run (a worker
    started again under its name, or another: client/revive.py): each process its own,
    lost, with the calls it answered and the bytes its connections carried (its own
    counters can no longer be asked)."""
    for links in session.links.values():
        for link in links:
            old, depth = link.before, 1
            while old is not None:  # (a binding's own transport: a link of its own)
                rs, _ = _row(session, rows, f"{old.name}\0{depth}", old, out, lost=True)
                rs.calls += old.calls
                old, depth = old.before, depth + 1


def _row(session: Session, rows: dict[str, ReplicaStats], key: str, link: ReplicaLink,
         out: SessionStats, lost: bool = False) -> tuple[ReplicaStats, bool]:
    """``link``'s bytes for this run added to ``out``, and its row (``key``) with its
    transport and address: the row, and whether it was made now."""
    sent, received = link_bytes(link)
    sent0, received0 = session._bytes0.get(id(link), (0, 0))
    out.bytes_sent += sent - sent0
    out.bytes_received += received - received0
    rs = rows.get(key)
    new = rs is None
    if rs is None:
        rs = rows[key] = ReplicaStats(link.name, speed=link.speed, lost=lost,
                                      module=link.module)
    scheme = link.channel.peer.partition("://")[0]
    if scheme not in rs.transports:
        rs.transports.append(scheme)
        rs.addresses.append(link.channel.peer)
    return rs, new
