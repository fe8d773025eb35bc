"""What a replica holds of a dataclass, which arrives as itself with pickle on: the
arrays in its fields counted and made read-only, a cycle pickle kept walked once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polybus.worker.heldvalue import freeze_inside, held_bytes


@dataclass
class Node:
    w: Any
    kids: list[Any] = field(default_factory=list)
    up: Any = None


def test_a_dataclass_s_arrays_are_counted_and_frozen() -> None:
    n = Node(np.zeros(10_000))
    assert held_bytes(n) >= 80_000
    assert held_bytes({"n": [n]}) >= 80_000
    freeze_inside({"n": [n]})
    assert not n.w.flags.writeable


def test_a_cycle_is_walked_once() -> None:
    a = Node(np.zeros(1000))
    b = Node(np.zeros(10), up=a)
    a.kids.append(b)
    loop: list[Any] = []
    loop.append(loop)
    c = Node(np.zeros(3), kids=loop)
    assert 8080 <= held_bytes(a) < 20_000
    assert held_bytes(c) >= 24
    freeze_inside(a)
    freeze_inside(c)
    assert not a.w.flags.writeable and not b.w.flags.writeable and not c.w.flags.writeable
