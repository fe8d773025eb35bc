"""Checks shared by the optional-peer tests: skip with the reason, and nothing left behind."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest

from polybus.bench.peers import why_unavailable
from polybus.bench.peers._proc import spawned_pids
from polybus.bench.stats import Stat

from .conftest import descendants, wait_gone


def need(peer: str) -> None:
    """Skip the test, saying why, when ``peer`` cannot run here."""
    why = why_unavailable(peer)
    if why:
        pytest.skip(f"{peer}: {why}")


def positive(stats: Iterable[Stat]) -> None:
    got = list(stats)
    assert got
    for st in got:
        assert all(math.isfinite(v) and v > 0 for v in (st.median, st.min, st.max)), st


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def leaves_nothing() -> Iterator[None]:
    """The block's child processes (and their process groups) are all gone after it."""
    before_kids = descendants(os.getpid())
    before = set(spawned_pids())
    yield
    started = set(spawned_pids()) - before
    assert started, "the peer started its processes through polybus.bench.peers._proc"
    left = wait_gone(started | (descendants(os.getpid()) - before_kids))
    assert not left, f"child processes left behind: {sorted(left)}"
    deadline = time.monotonic() + 10  # killed members may linger a moment as zombies
    groups = {p for p in started if _group_alive(p)}
    while groups and time.monotonic() < deadline:
        time.sleep(0.1)
        groups = {p for p in groups if _group_alive(p)}
    assert not groups, f"process groups left behind: {sorted(groups)}"
