"""``p.cancel()`` of an aggregated call (client/batching.py): while its batch is at the
client, open or waiting for a replica with room, the call is taken out of it.

Its place in the batch stays (the other calls' promises keep their indexes), marked
cancelled (``Pending.late``), and the batch carries only the others (``Pending.only``),
as when some of its calls could not be sent (client/batchsend.py): set when an open
batch is sealed (`Batcher._seal`), at once for a sealed one. A batch left with no call
is not sent at all (a sealed one leaves the queue). Once the batch is placed on a
replica (held back to be written with others, or written), it is one job there, run
whole: none of its calls can be cancelled alone, and `cancel_slot` says False (its
answer comes with the batch's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polybus.client.batchcalls import Slot
from polybus.client.calls import told
from polybus.client.calltext import call_text
from polybus.client.cancel import is_cancelled
from polybus.client.fwdbatch import settle
from polybus.client.pump import enter, leave
from polybus.client.unseen import seen
from polybus.errors import CancelledError

if TYPE_CHECKING:
    from polybus.client.batchcalls import Pending

__all__ = ["cancel_slot", "slot_cancelled"]


def slot_cancelled(b: Pending, i: int) -> bool:
    """Whether call ``i`` of batch ``b`` was cancelled (`cancel_slot`)."""
    return b.late is not None and is_cancelled(b.late.get(i))


def cancel_slot(b: Pending, i: int) -> bool:
    """Cancel call ``i`` of batch ``b`` if the batch has not left the client."""
    bt = b.batcher
    gate = bt.reactor.gate
    enter(gate)  # (the pump does not place batches meanwhile: client/pump.py)
    try:
        with bt.lock:
            if Slot(b, i).done:
                return slot_cancelled(b, i)
            if b is not bt.open and (b.link is not None or b not in bt.backlog):
                return False  # (placed: one job on its replica)
            said = call_text(bt.interface, b.args[i], None)
            if b.late is None:
                b.late = {}
            b.late[i] = seen(CancelledError(f"the call {said} was cancelled before it ran",
                                            interface=bt.interface, call=said))
            b.clean = False
            c = bt.d.counts
            c.cancelled += 1
            if b is not bt.open:  # sealed: its rows now, the batch dropped if none is left
                b.only = [j for j in (range(len(b.args)) if b.only is None else b.only)
                          if j != i]
                c.batched_calls -= 1
                if not b.only:
                    b.done, b.args = True, []
                    bt.backlog.remove(b)
                    c.batches -= 1
                    bt.batches -= 1
        told(bt, b)  # (calls waiting at the client for its value: client/awaiting.py)
        if b.entries is not None:
            settle(b)  # (its consumers, if forwarded: client/fwdbatch.py)
        return True
    finally:
        leave(gate)
