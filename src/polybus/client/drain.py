"""The calls a program made and never waited for are run to their end when it returns.

A client's entrypoint may return with calls still under way: sent, held to be written
with the next ones, in an ``async-demand`` backlog or an open aggregated batch. Stopping
the replicas then would drop them without a word (a program that fires a call and
returns, ``log_event(x); return``, saw it run or not by luck). So the run takes in their
answers first, as ``concurrent.futures``' shutdown waits for its futures; interface
timeouts and replica loss apply as to any call, and an error nobody will look at is
said (client/unseen.py). Calls given up on (their deadline passed) are not waited for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["drain", "under_way"]

STEP_S = 0.5  # one read at most, then look again (a backlog refills between reads)


def under_way(session: Session) -> int:
    """Calls of ``session`` not answered yet: outstanding or held on a live replica,
    backlogged, or in a batch not yet written."""
    links = [lk for lk in session.reactor.links if not lk.dead]
    return (sum(len(lk.outstanding) + len(lk.held) for lk in links)
            + sum(d.backlogged for d in session.dispatchers.values())
            + sum(bt.unwritten for bt in session.batchers))


def drain(session: Session) -> None:
    """Write what is held and read answers until no call of ``session`` is under way."""
    reactor = session.reactor
    while True:
        reactor.flush_all()
        if not under_way(session):
            return
        reactor.step(None, STEP_S)
