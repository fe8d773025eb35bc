"""A call a steal gives back goes to its new replica in one write with the Forward its
consumer asks of its answer there (client/migrate.py, client/later.py `gathered`).

Written apart, the replica could read the call, run it and answer it by value before
the Forward came, and the value went through the client. Between the two, the move
tells the replica that gave the call back to forget what was asked of it there (a
``Cancel``, client/fwdmove.py): a write to another replica, which must not split them.
No network: the real Migrator, Forwarder and `Later`, a reactor that defers and writes
as `Sending`'s does.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybus.client.forward import Forwarder
from polybus.client.fwdedge import Edge
from polybus.client.later import Later
from polybus.client.migrate import Migrator
from polybus.config.model import CallStyle
from polybus.wire.messages import Call, Cancel, Forward, Message


class Reactor:
    """Writes (one list per write, by replica name); a send made while this thread
    gathers waits for the block's end (as `Sending.send`)."""

    def __init__(self) -> None:
        self.later = Later()
        self.writes: list[tuple[str, list[Message]]] = []
        self.on_lost = lambda link, error: None

    def flush(self, link: Any) -> None:
        pass

    def send(self, link: Any, msg: Message) -> None:
        self.send_many(link, [msg])

    def send_many(self, link: Any, msgs: list[Message]) -> None:
        if self.later.reader is not None and self.later.defer(link, msgs):
            return
        self.writes.append((link.name, list(msgs)))


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, dead=False, outstanding={}, abandoned={}, held=[],
                           speed=1.0, channel=SimpleNamespace(peer=f"tcp://{name}"))


def test_a_moved_producer_and_its_forward_go_as_one_write() -> None:
    old, new, there = _link("r0"), _link("r1"), _link("r2")
    reactor = Reactor()
    f = Forwarder(SimpleNamespace(reactor=reactor, dials_again=False))  # type: ignore[arg-type]
    comm = SimpleNamespace(forwarder=f, messages=lambda rec, link, inline=False: [rec.message()])
    d = SimpleNamespace(links=[old, new], inflight=[1, 0], style=CallStyle(kind="async"),
                        comm=comm, reactor=reactor, _index={id(old): 0, id(new): 1},
                        _auto=None, _isolated={}, counts=SimpleNamespace(forwarded=0),
                        keep_args=True)
    producer = SimpleNamespace(id=7, dispatcher=d, done=False, link=old, attempts=1,
                               message=lambda: Call(7, "grow", [1]))
    old.outstanding[7] = producer
    consumer = SimpleNamespace(id=8, dispatcher=d, done=False)  # (placed on r2)
    e = Edge(producer, consumer, f"{f.nonce}.8.0")  # type: ignore[arg-type]
    e.to = there
    f.edges[7] = [e]
    m = Migrator(d, [], pool=1)  # type: ignore[arg-type]
    m._pending[5] = (old, new, 1)

    m.released(old, [7], 5)

    to_new = [msgs for name, msgs in reactor.writes if name == "r1"]
    assert len(to_new) == 1, f"written to the new replica in {len(to_new)} writes: {to_new}"
    call, forward = to_new[0]
    assert type(call) is Call and call.id == 7
    assert type(forward) is Forward and forward.id == 7 and forward.to == "tcp://r2"
    # (the replica it left forgets what was asked of it there)
    assert [msgs for name, msgs in reactor.writes if name == "r0"] == [[Cancel([7])]]
    assert reactor.later.reader is None and not reactor.later.queue
