"""How many calls a steal asks for: the replica gives the client's calls from the back
of its queue, any binding's, and one whose async-demand(N) binding has no room at the
receiver stays (placed again by its binding): the steal asks past those
(client/migrate.py `asked`; no network: fakes)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Literal

from polybus.client.migrate import asked
from polybus.config.model import CallStyle


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, outstanding={})


def _binding(src: Any, dst: Any, kind: Literal["async", "async-demand"], at_dst: int,
             window: int = 1) -> Any:
    return SimpleNamespace(style=CallStyle(kind=kind), _index={id(src): 0, id(dst): 1},
                           inflight=[0, at_dst], window=[window, window])


def _queue(src: Any, *calls: tuple[Any, float]) -> None:
    for cid, (d, prio) in enumerate(calls):
        src.outstanding[cid] = SimpleNamespace(id=cid, dispatcher=d, prio=prio)


def test_a_steal_asks_past_the_calls_at_the_back_that_cannot_go() -> None:
    src, dst = _link("r0"), _link("r1")
    mine = _binding(src, dst, "async", 0)
    full = _binding(src, dst, "async-demand", 1)  # (its one call at r1 already)
    _queue(src, (mine, 0.0), (mine, 0.0), (full, 0.0), (full, 0.0))
    assert asked(src, dst, 1) == 3  # (the two of `full` at the back, then one of mine)
    assert asked(src, dst, 2) == 4


def test_no_binding_with_a_window_asks_as_decided() -> None:
    src, dst = _link("r0"), _link("r1")
    mine = _binding(src, dst, "async", 0)
    _queue(src, (mine, 0.0), (mine, 0.0))
    assert asked(src, dst, 1) == 1


def test_room_at_the_receiver_and_priorities_are_counted() -> None:
    src, dst = _link("r0"), _link("r1")
    mine = _binding(src, dst, "async", 0)
    two = _binding(src, dst, "async-demand", 1, window=2)  # (room for one more at r1)
    # the back of r0's queue: lowest priority first, then the last sent
    _queue(src, (two, 0.0), (mine, 0.0), (two, -1.0))
    assert asked(src, dst, 1) == 1  # (two's low-priority call goes: room for one)
    assert asked(src, dst, 2) == 2  # (then mine)
    _queue(src, (two, 0.0), (two, 0.0), (mine, 5.0))
    assert asked(src, dst, 1) == 1  # (two's last goes)
    assert asked(src, dst, 2) == 3  # (two's first stays: asked past, to mine)


def test_nothing_asked_when_none_would_go() -> None:
    src, dst = _link("r0"), _link("r1")
    full = _binding(src, dst, "async-demand", 1)
    _queue(src, (full, 0.0), (full, 0.0))
    assert asked(src, dst, 1) == 0
