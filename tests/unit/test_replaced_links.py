"""A link put in the place of a lost one keeps it behind it (client/revive.py `follow`),
so the run's figures have a row for each process that served it (client/stats.py);
bounded, for a serve whose worker fails again and again (no network: links on a
stand-in channel)."""

from __future__ import annotations

from typing import Any

from polybus.client.calls import ReplicaLink
from polybus.client.revive import KEPT_BEFORE, follow


def _link() -> ReplicaLink:
    ch: Any = object()
    return ReplicaLink("kv-0", "kv", ch)


def _behind(link: ReplicaLink) -> list[ReplicaLink]:
    out, lk = [], link.before
    while lk is not None:
        out.append(lk)
        lk = lk.before
    return out


def test_each_link_replaced_is_kept_behind_the_new_one_in_order() -> None:
    a, b, c = _link(), _link(), _link()
    follow(b, a)
    follow(c, b)
    assert _behind(c) == [b, a] and a.before is None


def test_at_most_kept_before_links_are_kept_behind_a_place() -> None:
    first = last = _link()
    for _ in range(KEPT_BEFORE + 10):
        new = _link()
        follow(new, last)
        last = new
    behind = _behind(last)
    assert len(behind) == KEPT_BEFORE
    assert first not in behind  # (the oldest let go)
