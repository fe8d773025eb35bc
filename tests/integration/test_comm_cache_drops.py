"""Operand caching end to end, when a cached operand is named again, hashed again or
dropped at the replica: freed arrays, another array of the same content, arrays changed
in place or frozen, another client's use, a kept promise's arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .comm_harness import call, cluster
from .test_comm_cache import _rows, toml


def test_freed_operand_is_dropped_at_the_replica(tmp_path: Path) -> None:
    a, _ = _rows(32, 9)
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        for seed in range(4):  # a fresh B each round, the last one freed before the next
            b = _rows(32, 20 + seed)[1]
            assert np.allclose(call(s, "mul", a[0], b), a[0] @ b)
            assert np.allclose(call(s, "mul", a[1], b), a[1] @ b)
            del b
        # Each freed B was dropped ahead of the next round's Put: one B is held, not four.
        assert len(cache) == 1 and cache.evictions == 3 and cache.misses == 0


def test_drop_waits_for_the_last_array_of_that_content(tmp_path: Path) -> None:
    a, b = _rows(32, 10)
    twin = b.copy()  # same content, so the same name
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        assert np.allclose(call(s, "mul", a[0], b), a[0] @ b)
        assert np.allclose(call(s, "mul", a[1], twin), a[1] @ twin)  # (a Ref: same name)
        del b
        assert np.allclose(call(s, "mul", a[2], twin), a[2] @ twin)
        assert len(cache) == 1 and cache.evictions == 0  # still held: twin is alive
        del twin
        other = _rows(32, 11)[1]
        assert np.allclose(call(s, "mul", a[3], other), a[3] @ other)
        assert len(cache) == 1 and cache.evictions == 1 and cache.misses == 0


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_an_operand_changed_in_place_is_sent_again(tmp_path: Path, transport: str) -> None:
    """A power iteration updates its vector in place (``x[:] = ...``) between calls: each
    call must see the new bytes. The name used to be remembered per array object, and
    the replica answered every call after the first with the first round's B."""
    a, b = _rows(32, 14)
    with cluster(tmp_path, toml(), transport=transport) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        for k in range(4):
            b[:] = k  # the same array object, new content
            assert np.allclose(call(s, "mul", a[k], b), a[k] @ b)
        # The old contents were dropped as they were replaced: one B held, as before.
        assert len(cache) == 1 and cache.misses == 0


def test_a_read_only_operand_is_hashed_once(tmp_path: Path) -> None:
    """A frozen array cannot change, so its name is remembered (no pass over its bytes
    per call); every call still finds it cached."""
    from polybus.client import naming

    a, b = _rows(32, 15)
    b.flags.writeable = False
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        hashed = []
        real = naming._array_digest
        naming._array_digest = lambda *a: hashed.append(1) or real(*a)  # type: ignore[assignment, func-returns-value]
        try:
            for i in range(4):
                assert np.allclose(call(s, "mul", a[i], b), a[i] @ b)
        finally:
            naming._array_digest = real  # type: ignore[assignment]
        assert len(hashed) == 1 and c.runtimes[0].cache.hits == 4


def test_a_fresh_array_of_a_freed_arrays_content_is_not_dropped(tmp_path: Path) -> None:
    """b = b0.copy() each round: the freed array's content is live again when the
    drops are worked out (after the call's operands are named), so it is not dropped
    in the very message that names it (which made every round a miss and a re-send)."""
    a, b0 = _rows(32, 16)
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        b = b0.copy()
        for k in range(4):
            assert np.allclose(call(s, "mul", a[k], b), a[k] @ b0)
            b = b0.copy()  # the old one is freed here
        assert cache.misses == 0 and len(cache) == 1


def test_an_array_frozen_after_a_change_is_hashed_again(tmp_path: Path) -> None:
    """Hashed while writable, changed, then frozen: the name remembered while it was
    writable is not trusted."""
    a, b = _rows(32, 17)
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        assert np.allclose(call(s, "mul", a[0], b), a[0] @ b)
        b[:] = 7.0
        b.flags.writeable = False
        assert np.allclose(call(s, "mul", a[1], b), a[1] @ b)


def test_drop_spares_an_entry_another_client_uses(tmp_path: Path) -> None:
    a, b = _rows(32, 12)
    with cluster(tmp_path, toml()) as c:
        s1, s2 = c.session(), c.session()
        shared = b.copy()
        assert np.allclose(call(s1, "mul", a[0], b), a[0] @ b)
        assert np.allclose(call(s2, "mul", a[1], shared), a[1] @ b)
        del b, shared  # both clients' arrays of that content are gone
        other = _rows(32, 13)[1]
        assert np.allclose(call(s1, "mul", a[2], other), a[2] @ other)
        # s1 dropped its use; s2 has not written since, so the entry stays for it.
        cache = c.runtimes[0].cache
        assert len(cache) == 2 and cache.evictions == 0


def test_a_kept_promise_does_not_pin_its_arguments(tmp_path: Path) -> None:
    import weakref

    from polybus import wait

    a, _ = _rows(32, 14)
    with cluster(tmp_path, toml(style="async")) as c:
        s = c.session()
        b = _rows(32, 15)[1]
        p = s.call("mul", (a[0], b), {})
        assert np.allclose(wait(p), a[0] @ b)
        gone = weakref.ref(b)
        del b
        assert gone() is None  # the answered call let its arguments go; p still answers
        assert np.allclose(wait(p), a[0] @ _rows(32, 15)[1])
        other = _rows(32, 16)[1]
        assert np.allclose(wait(s.call("mul", (a[1], other), {})), a[1] @ other)
        assert len(c.runtimes[0].cache) == 1  # so the old B was dropped with this call
