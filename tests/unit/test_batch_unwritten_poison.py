"""An aggregated batch's try that never reached its replica counts toward no poison rule
(client/batchsend.py's `requeue`; no network: fakes as in test_batch_refill.py).

A batch lost while still at the client (held for company, or left unwritten: its id in
the lost link's ``unwritten``) runs again, idempotent or not, and that loss is no
failed try: only losses of a batch that may have reached its replica count toward the
3 (``max_attempts``) that fail it with PoisonCallError. It counted, so a batch lost
unwritten once and then with 2 replicas failed as poison."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from polybus.client import batchrefill
from polybus.client.batchcalls import Pending
from polybus.client.batching import Batcher
from polybus.client.counts import Counts
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError, PoisonCallError


class _Reactor:
    def __init__(self) -> None:
        self.flushers: list[Any] = []
        self.gate = None

    def send(self, link: Any, msg: Any) -> None:
        pass

    def send_many(self, link: Any, msgs: list[Any]) -> None:
        pass

    def work_left(self) -> None:
        pass

    def stir(self) -> None:
        pass

    def poll(self) -> None:
        pass


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, unwritten=frozenset(), dead=False, outstanding={},
                           abandoned={}, held=[], load=0, module="m")


def _placed_on(bt: Batcher, b: Pending) -> Any:
    (link,) = [lk for lk in bt.links if b.id in lk.outstanding]
    return link


def _lose(bt: Batcher, link: Any, *, unwritten: bool) -> None:
    """``link``'s replica lost (its batches written to it, or not), a fresh replica
    in its place, and the backlog placed again."""
    if unwritten:
        link.unwritten = frozenset(link.outstanding)
    link.dead = True
    bt.lost(link, ConnectionLostError(f"{link.name} closed the connection"))
    new = _link(link.name + "'")
    bt.links[bt.links.index(link)] = new  # (what Dispatcher.replace does to the shared list)
    assert batchrefill.replace(bt, link, new)
    bt.pump()


def test_a_loss_unwritten_is_no_try_toward_poison() -> None:
    links = [_link("r0"), _link("r1")]
    d = SimpleNamespace(interface="f", timeout=None, links=links, comm=None, calls=0,
                        style=CallStyle("async-demand", 1), idempotent=True,
                        max_attempts=3, counts=Counts(), rejoins=False)
    bt = Batcher(d, _Reactor(), 2, None, 3600.0)  # type: ignore[arg-type]
    b = Pending(bt, time.monotonic())
    b.args += [(1,), (2,)]
    bt._close(b)
    _lose(bt, _placed_on(bt, b), unwritten=True)  # never reached it: no failed try
    _lose(bt, _placed_on(bt, b), unwritten=False)  # lost with 1 replica
    _lose(bt, _placed_on(bt, b), unwritten=False)  # with 2 in a row
    assert b.error is None and not b.done  # (it failed here as poison)
    assert _placed_on(bt, b) is not None  # placed a fourth time
    _lose(bt, _placed_on(bt, b), unwritten=False)  # the third loss that may have run it
    assert isinstance(b.error, PoisonCallError)
    assert "lost with 3 replicas" in str(b.error)
    assert d.counts.run_again == 3 * 2  # every try after the first, its two calls each
