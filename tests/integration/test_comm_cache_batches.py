"""Operand caching on the lean aggregation path: a batch names its calls' cached
operands, a replica that lost one answers for the whole batch, and freed operands are
dropped as on single calls."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from polybus import wait
from polybus.client.batching import Batcher
from polybus.errors import MessageTooLarge

from .comm_harness import cluster
from .test_comm_cache import _rows, toml


def agg_toml(cache: str = '["b"]', count: int = 8) -> str:
    return toml(cache=cache, style="async").replace(
        'callstyle = "async" }', f'callstyle = "async", aggregate = {count}, linger = "1s" }}')


def _products(s: object, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    rows = [s.call("mul", (a[i], b), {}) for i in range(len(a))]  # type: ignore[attr-defined]
    return np.vstack([wait(r) for r in rows])


def _add_toml(cache_bytes: int) -> str:
    return agg_toml(cache='["x", "y"]').replace("define.mul", "define.add").replace(
        "use.mul", "use.add").replace('"client.mul" = "server.mul"',
                                      '"client.add" = "server.add"').replace(
        f"cache_bytes = {1 << 26}", f"cache_bytes = {cache_bytes}")


def _scale_toml(cache_bytes: int) -> str:
    return agg_toml(cache='["x"]').replace("define.mul", "define.scale").replace(
        "use.mul", "use.scale").replace('"client.mul" = "server.mul"',
                                        '"client.scale" = "server.scale"').replace(
        f"cache_bytes = {1 << 26}", f"cache_bytes = {cache_bytes}")


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_batches_send_b_once(tmp_path: Path, transport: str) -> None:
    a, b = _rows(64, 31)
    with cluster(tmp_path, agg_toml(), transport=transport) as c:
        s = c.session()
        assert type(s.entries["mul"]) is Batcher  # the lean path, with the cache on it
        assert np.allclose(_products(s, a, b), a @ b)
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        if transport == "shm":
            sent += sum(lk.channel.shm_bytes_sent for lk in s.links["server"])
        cache = c.runtimes[0].cache
        # 8 batches of 8 calls: every call found B here, sent once (32 KiB) with the rows
        # (512 B each, and ~60 B of header); sent by value it would be 64 times, 2 MiB.
        assert cache.hits == 64 and cache.misses == 0 and len(cache) == 1
        assert s.batchers[0].batches == 8
        assert sent < b.nbytes + a.nbytes + 64 * 100


def test_batch_miss_is_resent_with_its_operand_put_again(tmp_path: Path) -> None:
    a, b = _rows(16, 32)
    with cluster(tmp_path, agg_toml()) as c:
        s = c.session()
        assert np.allclose(_products(s, a[:8], b), a[:8] @ b)
        c.runtimes[0].cache.clear()  # what a restarted replica has: nothing
        assert np.allclose(_products(s, a[8:], b), a[8:] @ b)  # one batch, missed whole
        assert s.batchers[0].comm is not None and s.batchers[0].comm.resent == 1
        assert c.runtimes[0].cache.misses == 1
        # The batch went again after a Put of B; the next one names it.
        assert np.allclose(_products(s, a[:8], b), a[:8] @ b)
        assert c.runtimes[0].cache.misses == 1
        assert len(c.runtimes[0].cache) == 1


def test_freed_operands_are_dropped_between_batches(tmp_path: Path) -> None:
    a, _ = _rows(16, 33)
    with cluster(tmp_path, agg_toml()) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        for seed in range(4):  # a fresh B each round, freed before the next
            b = _rows(16, 40 + seed)[1]
            assert np.allclose(_products(s, a[:8], b), a[:8] @ b)
            del b
        assert len(cache) == 1 and cache.evictions == 3 and cache.misses == 0


def test_only_the_named_argument_is_cached_in_a_batch(tmp_path: Path) -> None:
    a, b = _rows(32, 34)
    with cluster(tmp_path, agg_toml(cache='["row"]')) as c:
        s = c.session()
        assert np.allclose(_products(s, a[:8], b), a[:8] @ b)
        # The 8 rows are cached (8 entries), B is not.
        assert len(c.runtimes[0].cache) == 8


def _outcome(p: object) -> object:
    try:
        return np.asarray(wait(p)).tolist()
    except TypeError as exc:  # (UnsendableError is one)
        return [type(exc).__name__, str(exc)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize("bad", ["object-array", "object"])
def test_an_unsendable_call_in_a_batch_fails_alone(tmp_path: Path, transport: str,
                                                    bad: str) -> None:
    # cache = ["x"]: an array of Python objects cannot be hashed (named) nor encoded; a
    # plain object() in the other argument cannot be encoded. Either call fails alone,
    # as an UnsendableError naming its argument, as it did when a cached binding took
    # the general path; the calls batched with it are answered.
    text = agg_toml(cache='["x"]').replace("define.mul", "define.scale").replace(
        "use.mul", "use.scale").replace('"client.mul" = "server.mul"',
                                        '"client.scale" = "server.scale"')
    x = np.arange(3.0)
    args = ((np.array([object()], dtype=object), 2) if bad == "object-array"
            else (x, object()))
    with cluster(tmp_path, text, transport=transport) as c:
        s = c.session()
        assert type(s.entries["scale"]) is Batcher
        for _ in range(2):  # (the second time: nothing was left stuck by the first)
            calls = [s.call("scale", (x, k), {}) for k in range(3)]
            calls.append(s.call("scale", args, {}))
            calls += [s.call("scale", (x, k), {}) for k in range(3, 5)]
            out = [_outcome(p) for p in calls]
            assert out[:3] + out[4:] == [(x * k).tolist() for k in range(5)]
            why = out[3]
            assert isinstance(why, list) and why[0] == "UnsendableError", why
            assert why[1].startswith(f"scale(...) argument {1 if bad == 'object-array' else 2}"), why


@pytest.mark.timeout(60)
def test_a_missed_batch_goes_again_within_max_frame(tmp_path: Path) -> None:
    # 8 calls naming one B of 320 KB, max_frame 1 MiB: sent again with B by value in
    # each call, the batch was 2.5 MB, over the limit; MessageTooLarge came out of the
    # read that took the miss and the batch's calls were never answered.
    a, b = _rows(200, 35)
    text = agg_toml() + '\n[cluster]\nmax_frame = "1MiB"\n'
    with cluster(tmp_path, text) as c:
        s = c.session()
        assert np.allclose(_products(s, a[:8], b), a[:8] @ b)
        c.runtimes[0].cache.clear()  # (evicted, or a restarted replica)
        assert np.allclose(_products(s, a[8:16], b), a[8:16] @ b)
        assert s.batchers[0].comm is not None and s.batchers[0].comm.resent == 1


@pytest.mark.timeout(60)
def test_a_call_whose_operands_do_not_fit_in_the_cache_goes_alone_by_value(
        tmp_path: Path) -> None:
    # Each call names two 160 KB operands; the replica's cache holds one. Batched and
    # Put, each Put evicted an operand the batch named: it missed, went again after a
    # Put of that one, missed again and went with values (4 misses and 6.9 MB here for
    # the 16 calls). Such a call now goes in a batch of its own, with its values: no
    # Put, no miss, each call's two operands sent once (5.1 MB).
    text = _add_toml(200000)
    xs = [np.full(20000, float(i)) for i in range(8)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        for _ in range(2):
            calls = [s.call("add", (xs[i], xs[(i + 1) % 8]), {}) for i in range(8)]
            assert [float(np.asarray(wait(p))[0]) for p in calls] == [
                float(i + (i + 1) % 8) for i in range(8)]
        cache = c.runtimes[0].cache
        assert cache.misses == 0 and len(cache) == 0
        assert s.batchers[0].batches == 16
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        assert sent < 16 * 2 * xs[0].nbytes + 16 * 200


@pytest.mark.timeout(60)
def test_operands_that_fit_neither_the_cache_nor_a_frame_fail_their_call_alone(
        tmp_path: Path) -> None:
    # Two 600 KB operands a call, a cache of 200000 bytes, max_frame 1 MiB: by value the
    # call is no frame, so it is named as any (Puts, two misses); with values at last it
    # fails with MessageTooLarge on its promise, not in the hands of whoever placed it.
    text = _add_toml(200000) + '\n[cluster]\nmax_frame = "1MiB"\n'
    xs = [np.full(75000, float(i)) for i in range(3)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        calls = [s.call("add", (xs[i], xs[i + 1]), {}) for i in range(2)]
        for p in calls:
            with pytest.raises(MessageTooLarge):
                wait(p)
        small = np.ones(3)
        assert np.asarray(wait(s.call("add", (small, small), {}))).tolist() == [2.0] * 3


@pytest.mark.timeout(60)
def test_a_batch_that_misses_names_every_operand_it_lacks(tmp_path: Path) -> None:
    # The replica lost both operands a batch names (restarted, say), which the client
    # believes it holds. The miss named only the first: the batch went again after a
    # Put of it, missed on the second and went with its values. Now the miss names both,
    # and the batch goes again once, after a Put of each.
    xs = [np.full(10000, float(i)) for i in range(2)]
    with cluster(tmp_path, _scale_toml(1 << 26)) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        for r in range(3):
            calls = [s.call("scale", (xs[i % 2], 2), {}) for i in range(8)]
            assert [float(np.asarray(wait(p))[0]) for p in calls] == [
                2.0 * (i % 2) for i in range(8)]
            if r == 0:
                cache.clear()
        comm = s.batchers[0].comm
        assert comm is not None and comm.resent == 1 and cache.misses == 2
        assert s.batchers[0].batches == 3 and len(cache) == 2


@pytest.mark.timeout(60)
def test_a_batch_that_misses_again_goes_with_values(tmp_path: Path) -> None:
    # A replica whose cache is smaller than the client knows (here made so by hand)
    # holds one of the two 80 KB operands a batch names: their Puts evict each other.
    # The batch misses the first, goes again after a Put of it (which evicts the
    # second), misses that one and goes with its values (no third try).
    xs = [np.full(10000, float(i)) for i in range(2)]
    with cluster(tmp_path, _scale_toml(1 << 26)) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        cache.capacity = 100000
        calls = [s.call("scale", (xs[i % 2], 2), {}) for i in range(8)]
        assert [float(np.asarray(wait(p))[0]) for p in calls] == [
            2.0 * (i % 2) for i in range(8)]
        comm = s.batchers[0].comm
        assert comm is not None and comm.resent == 2 and cache.misses == 2


def _timer_prefetch_toml() -> str:
    """2 replicas, prefetch = "all", one call in flight each, a short linger: a lone
    call's batch is closed and placed by the linger timer, which pushes B to both."""
    return agg_toml().replace(
        "replication = 1", "replication = 2").replace(
        "cache_bytes", 'prefetch = "all", cache_bytes').replace(
        'callstyle = "async"', 'callstyle = "async-demand(1)"').replace(
        'linger = "1s"', 'linger = "20ms"')


@pytest.mark.timeout(60)
def test_the_linger_timer_prefetching_to_a_lost_replica_does_not_hang(tmp_path: Path) -> None:
    # prefetch = "all": a batch the linger timer closes and places pushes B to the other
    # replica too. Sent from the timer through the reactor, that Put found server-1 gone
    # and the loss handling waited for the timer to step aside: the timer waited for
    # itself, and every later call (and this wait) with it, for ever.
    text = _timer_prefetch_toml()
    rng = np.random.default_rng(36)
    row, b = rng.random(2000), rng.random((2000, 1000))  # B of 16 MB
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        batcher = s.batchers[0]
        for ch in list(c.runtimes[1]._channels):  # server-1 is gone; the client is not told
            ch.close()
        p = s.call("mul", (row, b), {})  # a lone call: its batch is the timer's to place
        deadline = time.monotonic() + 20
        while batcher.open is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batcher.open is None  # (the timer closed it)
        assert np.allclose(wait(p), row @ b)
        assert np.allclose(wait(s.call("mul", (row, b), {})), row @ b)
        assert c.runtimes[0].calls == 2


@pytest.mark.timeout(60)
def test_the_linger_timer_still_prefetches_to_every_replica(tmp_path: Path) -> None:
    # (the Puts it leaves for the other replicas are written with what is held for them)
    text = _timer_prefetch_toml()
    rng = np.random.default_rng(37)
    row, b = rng.random(200), rng.random((200, 100))
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        p = s.call("mul", (row, b), {})  # a lone call: its batch is the timer's to place
        deadline = time.monotonic() + 20
        # (either replica may be the one placed on: the other's Put may come after)
        while (not (c.runtimes[0].cache and c.runtimes[1].cache)
               and time.monotonic() < deadline):
            time.sleep(0.01)
        assert len(c.runtimes[0].cache) == len(c.runtimes[1].cache) == 1
        assert np.allclose(wait(p), row @ b)


def test_an_array_changed_after_a_held_call_does_not_take_its_old_name(tmp_path: Path) -> None:
    # A call with a keyword argument takes the general path, where an aggregating binding
    # holds its messages to write them together. Its Put was held too, and encoded when
    # written: x changed in place meanwhile went to the replica under the name of its old
    # content (zeros), and a later call naming zeros got fives.
    text = agg_toml(cache='["x"]').replace("define.mul", "define.scale").replace(
        "use.mul", "use.scale").replace('"client.mul" = "server.mul"',
                                        '"client.scale" = "server.scale"')
    with cluster(tmp_path, text) as c:
        s = c.session()
        x = np.zeros(3)
        first = s.call("scale", (x,), {"k": 1})
        x += 5
        wait(first)
        assert np.asarray(wait(s.call("scale", (np.zeros(3),), {"k": 1}))).tolist() == [0.0] * 3
        assert np.asarray(wait(s.call("scale", (np.zeros(3), 1), {}))).tolist() == [0.0] * 3


@pytest.mark.timeout(60)
def test_a_batch_holds_no_more_distinct_operands_than_the_cache(tmp_path: Path) -> None:
    # 8 calls a round, each naming its own 80 KB operand; the replica's cache holds two.
    # In one batch of 8, each Put evicted an operand the batch named: it missed, went
    # again after a Put of that one, missed again (another evicted) and went with every
    # value: two misses a batch, 2.7 MB sent for 1.3 MB of operands, where calls one by
    # one send each once. A batch now closes before its operands would pass cache_bytes:
    # 4 batches of 2 a round.
    xs = [np.full(10000, float(i)) for i in range(16)]
    with cluster(tmp_path, _scale_toml(200000)) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        for r in range(2):  # (a fresh set of operands each round)
            calls = [s.call("scale", (xs[8 * r + i], 2), {}) for i in range(8)]
            assert [float(np.asarray(wait(p))[0]) for p in calls] == [
                2.0 * (8 * r + i) for i in range(8)]
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        batcher = s.batchers[0]
        assert batcher.comm is not None
        assert cache.misses == 0 and batcher.comm.resent == 0
        assert batcher.batches == 8
        assert sent < 16 * xs[0].nbytes + 16 * 200  # each operand once (and headers)


def test_one_operand_larger_than_the_cache_is_still_put_once_for_full_batches(
        tmp_path: Path) -> None:
    # B (32 KiB) is more than the cache's 16000 bytes: the replica keeps it alone, so the
    # calls that share it still go 8 to a batch, naming it, and it is sent once.
    a, b = _rows(64, 38)
    text = agg_toml().replace(f"cache_bytes = {1 << 26}", "cache_bytes = 16000")
    with cluster(tmp_path, text) as c:
        s = c.session()
        assert np.allclose(_products(s, a, b), a @ b)
        cache = c.runtimes[0].cache
        assert cache.hits == 64 and cache.misses == 0 and len(cache) == 1
        assert s.batchers[0].batches == 8


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_misses_while_a_resend_waits_for_room_do_not_hang(tmp_path: Path,
                                                          transport: str) -> None:
    # 7 operands of 160 KB, 1 MiB of cache on each of 2 replicas, 200 aggregated calls:
    # the replicas keep evicting, and a miss's re-send fills the shm ring. The read it
    # made meanwhile took in another miss, whose re-send to the same replica waited for
    # the lock the first held: the client hung (a new user's app, every time). Those
    # re-sends now go when the first is written (client/later.py).
    # (The client now follows what its Puts evict at a replica, client/held.py, and
    # these batches no longer miss: it is made not to know the replicas' bound, as
    # before, when it believed every operand it had put still held.)
    xs = [np.full(20000, float(j)) for j in range(7)]
    with cluster(tmp_path, _scale_toml(1 << 20), replicas=2, transport=transport) as c:
        s = c.session()
        assert s.batchers[0].comm is not None
        s.batchers[0].comm.capacity = 0
        calls = [s.call("scale", (xs[i % 7], i), {}) for i in range(200)]
        assert [float(np.asarray(wait(p))[0]) for p in calls] == [
            float((i % 7) * i) for i in range(200)]
        assert sum(rt.cache.misses for rt in c.runtimes) > 0  # (the case: it evicted)
