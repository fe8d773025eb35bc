"""The awake-flag handshake of transport/ring.py driven step by step: a reader about to
sleep (flag down, fence, last look at ``written``) and a writer publishing a frame
(``written`` stored, fence, look at the flag). In every interleaving of the two the
reader sees the frame or the writer rings the doorbell: no wakeup is lost. (The fences
are what make this hold on real hardware too; each step here is one store or load.)"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from polybus.transport import ring as ring_mod
from polybus.transport.ring import Ring, fence

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")


@contextmanager
def _pair() -> Iterator[tuple[Ring, Ring]]:
    w = Ring.create(4096)
    r = Ring.attach(w.fd)  # the same memfd mapped twice: the two processes' views
    try:
        yield w, r
    finally:
        r.close()
        w.close()


def _interleavings(a: int, b: int) -> Iterator[tuple[int, ...]]:
    """Every order of ``a`` steps of side 0 and ``b`` of side 1, each side in order."""
    for where in itertools.combinations(range(a + b), a):
        yield tuple(0 if i in where else 1 for i in range(a + b))


@pytest.mark.parametrize("order", list(_interleavings(3, 3)))
def test_no_interleaving_loses_the_wakeup(order: tuple[int, ...]) -> None:
    with _pair() as (w, r):
        r.set_awake(True)  # the reader ran (spun) with its flag up
        seen: list[bool] = []
        rang: list[bool] = []
        reader: list[Callable[[], None]] = [
            lambda: r.set_awake(False), fence, lambda: seen.append(r.available() > 0)]
        writer: list[Callable[[], None]] = [
            lambda: rang.append(w.write_small(b"frame") == 0),  # (published: 5 bytes)
            fence, lambda: rang.append(not w.reader_awake())]
        steps = [iter(reader), iter(writer)]
        for side in order:
            next(steps[side])()
        assert rang[0] is False  # the frame fitted
        assert seen[0] or rang[1], f"lost wakeup in {order}"


def test_a_raised_flag_silences_the_writer_and_a_lowered_one_does_not() -> None:
    with _pair() as (w, r):
        assert not w.reader_awake()  # a fresh ring: the reader counts as asleep
        r.set_awake(True)
        assert w.reader_awake()
        r.set_awake(False)
        assert not w.reader_awake()
        assert w.write_small(b"x") == 1 and r.available() == 1
