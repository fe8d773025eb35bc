"""`Dispatcher.replace` puts a new link in a lost one's place (client/revive.py) while
the program's other threads may be calling: a call placed on the new link the moment it
is there stays counted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client.dispatch import Dispatcher
from polybus.config.model import CallStyle


def _link(name: str, dead: bool = False) -> Any:
    return SimpleNamespace(name=name, dead=dead, outstanding={}, held=False)


@pytest.mark.parametrize("window", [2, None])
def test_a_call_placed_on_the_new_link_at_once_stays_counted(window: int | None) -> None:
    """Its counts were reset after the link was in place: a call another thread placed
    there in between was counted out (inflight 0 with a call in flight, and -1 once it
    answered), so async-demand gave the replica one call more than its window."""
    old, other, new = _link("a-0", dead=True), _link("a-1"), _link("a-0")
    d = Dispatcher("f", SimpleNamespace(), [old, other],  # type: ignore[arg-type]
                   CallStyle("async-demand", window))

    class Placing(list[Any]):
        def __setitem__(self, i: Any, link: Any) -> None:
            super().__setitem__(i, link)
            d.inflight[d._index[id(link)]] += 1  # (another thread's call, placed on it)

    d.links = Placing(d.links)
    d.replace(old, new)
    assert d.links[0] is new
    assert d.inflight == [1, 0]
    assert d.window[0] == (window or 2)
