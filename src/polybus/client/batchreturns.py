"""What comes back to an aggregating binding's placed batches (client/batching.py): an
answer, which frees the batch's place at its replica; a replica lost, whose batches run
again elsewhere or fail; a batch a steal gave back, to be placed again; and what is
asked of a placed batch (forwarding's requests, fwdbatch.py), which goes after it.

These come on the thread that reads answers, or on another binding's caller, while the
binding's lock may be held by a thread waiting on that very connection: each is noted
and left to whoever holds the lock next (batchsend.py's `settle_owed`), never waited
for. They are `Batcher`'s methods (assigned in its class, so called as any method is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from polybus.client.batchsend import settle_owed
from polybus.errors import PolybusError

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending
    from polybus.client.batching import Batcher, Made
    from polybus.client.calls import ReplicaLink

__all__ = ["after", "completed", "given_back", "lost"]


def completed(self: Batcher, b: Pending, link: ReplicaLink) -> None:
    """Batch ``b`` was answered on ``link``: its place there is free."""
    i = self._index[id(link)]
    if self.inflight[i] > 0:
        self.inflight[i] -= 1
    if self.awaited is not None:
        self.awaited.answered(b)
    # Queued batches go out in the reactor's after_step (never from inside a read).


def after(self: Batcher, link: ReplicaLink, make: Made) -> None:
    """What ``make`` builds about a batch placed on ``link`` (fwdbatch.py's `ask`)
    goes after it: with it if held back, else now (batchsend.py's `write_after`)."""
    self._after.append((link, make))
    settle_owed(self)


def lost(self: Batcher, link: ReplicaLink, error: PolybusError) -> None:
    """``link``'s replica is gone: its batches run again elsewhere, or fail."""
    i = self._index.get(id(link))
    if i is None:
        return
    # Not waited for: the thread that holds the lock may be waiting to write on a
    # connection whose writer is the thread that found this replica lost.
    self._lost_later.append((link, i, error))
    settle_owed(self)


def given_back(self: Batcher, place_again: Callable[[], None]) -> None:
    """A batch a steal gave back (migrate.py): ``place_again`` runs under the lock,
    now if it is free, else by its holder as it lets go (batchsend.py)."""
    self._back_later.append(place_again)
    settle_owed(self)
