"""A call a steal gives back, placed again in its binding's async-demand backlog, waits
at the client: its record names no replica (``link`` None), as every call in a backlog
does. Named the replica that gave it back, a wait for it read that replica alone (the
lone-call path, client/alone.py: nothing else in flight) and never placed it: the run
hung (found by tests/integration/stratmix.py: a migration path, an async-demand binding
and a pipeline's producers on the same module). No network: fakes.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from polybus.client.calls import CallRecord, waiting_for
from polybus.client.counts import Counts
from polybus.client.giveback import place_again
from polybus.client.migrate import Migrator
from polybus.config.model import CallStyle


def _link(name: str) -> Any:
    return SimpleNamespace(name=name, dead=False, outstanding={}, abandoned={}, held=[],
                           got=[], speed=1.0)


def _demand(links: list[Any], window: int, inflight: list[int]) -> Any:
    """A binding of async-demand(``window``) over ``links``: what giving back reads."""
    reactor = SimpleNamespace(flush=lambda link: None, work_left=lambda: None,
                              send_many=lambda link, msgs: link.got.extend(msgs))
    return SimpleNamespace(interface="small", links=links, inflight=list(inflight),
                           window=[window] * len(links), reactor=reactor, comm=None,
                           style=CallStyle(kind="async-demand", window=window), timeout=None,
                           _index={id(lk): i for i, lk in enumerate(links)}, _isolated={},
                           _backlog=[], _seq=itertools.count(), _auto=None,
                           counts=Counts())


def _at(d: Any, link: Any, cid: int) -> CallRecord:
    rec = CallRecord(cid, d, [cid], None, 0.0)
    rec.link, rec.attempts = link, 1
    link.outstanding[cid] = rec
    return rec


def test_a_call_given_back_to_the_backlog_names_no_replica() -> None:
    a, b = _link("s1a"), _link("s1b")
    d = _demand([a, b], window=1, inflight=[1, 1])  # (no room at b: it goes back)
    rec = _at(d, a, 7)
    m = Migrator(d, [], pool=1)
    m._pending[99] = (a, b, 1)
    m.released(a, [7], 99)
    assert [e[2] for e in d._backlog] == [rec]  # waiting at the client, in the backlog
    assert not a.outstanding and not b.outstanding and a.got == b.got == []
    assert rec.link is None
    assert "held at the client" in waiting_for(rec)


def test_place_again_leaves_a_backlogged_call_at_no_replica() -> None:
    a, b = _link("s1a"), _link("s1b")
    d = _demand([a, b], window=2, inflight=[0, 0])
    rec = _at(d, a, 3)
    del a.outstanding[3]
    place_again(a, [rec])
    assert rec.link is None and [e[2] for e in d._backlog] == [rec]
