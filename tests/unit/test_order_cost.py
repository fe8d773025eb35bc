"""Calls held back at the client by one module's bindings are written before a later
call of another of its bindings (client/order.py), and cost nothing to the calls of a
module that holds none back: giving a module an Order used to set the reactor's
``refills``, after which every sync call of every module wrote everything first and
took the after-step path."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybus.client.dispatch import Dispatcher
from polybus.client.order import Order, Ordered, order_calls


def _d(kind: str, link: object, aggregator: object = None) -> Any:
    comm = SimpleNamespace(aggregator=aggregator) if aggregator is not None else None
    return SimpleNamespace(links=[link], style=SimpleNamespace(kind=kind), comm=comm,
                           order=None)


def test_a_module_holding_calls_back_leaves_the_reactor_alone() -> None:
    reactor = SimpleNamespace(refills=False)
    a, b = object(), object()
    ds = {"get": _d("sync", a),  # module a: nothing held back
          "put": _d("async", b, aggregator=object()),  # module b: the general path's
          "peek": _d("sync", b), "other": _d("async", b)}  # aggregation, and two more
    entries: dict[str, Any] = {n: f"entry-{n}" for n in ds}
    order_calls(reactor, ds, entries, [])  # type: ignore[arg-type]
    assert reactor.refills is False  # (module a's sync calls write nothing first)
    assert ds["get"].order is None and entries["get"] == "entry-get"
    assert isinstance(ds["peek"].order, Order)  # (module b's sync call writes first)
    assert isinstance(entries["put"], Ordered) and isinstance(entries["other"], Ordered)


class _Reactor:
    refills = False

    def __init__(self) -> None:
        self.did: list[str] = []

    def flush_all(self) -> None:
        self.did.append("flush")

    def call_alone(self, rec: Any, link: Any) -> str:
        self.did.append("call")
        return "answer"


def _sync(reactor: _Reactor, order: Order | None) -> Dispatcher:
    link = SimpleNamespace(dead=False, outstanding={})
    d = Dispatcher.__new__(Dispatcher)
    d.__dict__.update(reactor=reactor, _lane=None, pickle=None, calls=0, links=[link],
                      _isolated=False, inflight=[0], _index={id(link): 0}, order=order,
                      timeout=None)
    return d


def test_a_sync_call_writes_its_modules_held_calls_first() -> None:
    """With the reactor's ``refills`` unset, a sync call of a module with an Order
    still writes what is held back before it is written."""
    reactor = _Reactor()
    assert _sync(reactor, Order(None)).call_sync((1,), {}) == "answer"  # type: ignore[arg-type]
    assert reactor.did == ["flush", "call"]


def test_a_sync_call_of_a_module_holding_nothing_writes_nothing_first() -> None:
    reactor = _Reactor()
    assert _sync(reactor, None).call_sync((1,), {}) == "answer"
    assert reactor.did == ["call"]
