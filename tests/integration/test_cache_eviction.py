"""Operand caching while a replica's cache evicts: a call's or batch's own Puts spare
the operands it names (Put.keep), and aggregated calls send about the bytes single
calls send, not a multiple of them (client/held.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polybus import wait
from polybus.errors import RemoteException

from .comm_harness import call, cluster
from .test_comm_cache import toml


def test_a_calls_put_spares_its_other_operand(tmp_path: Path) -> None:
    # Two 80 KB operands a call, a cache of 200000 bytes (two of them). add(x2, x0)
    # after add(x0, x1): x0 is held, x2 is put, and the replica then held x1 as its
    # most recently used (looked up after x0), so the Put of x2 evicted x0, which the
    # call names: it missed and went again. Its Put now keeps x0: x1 goes.
    text = toml(cache='["x", "y"]', cache_bytes=200_000).replace("mul", "add")
    xs = [np.full(10000, float(i)) for i in range(3)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        assert float(call(s, "add", xs[0], xs[1])[0]) == 1.0
        assert float(call(s, "add", xs[2], xs[0])[0]) == 2.0
        cache = c.runtimes[0].cache
        assert cache.misses == 0 and cache.evictions == 1 and len(cache) == 2


def _toml(aggregate: bool) -> str:
    text = toml(cache='["x"]', style="async", cache_bytes=1 << 20).replace(
        "define.mul", "define.scale").replace("use.mul", "use.scale").replace(
        '"client.mul" = "server.mul"', '"client.scale" = "server.scale"')
    if aggregate:
        text = text.replace('callstyle = "async" }',
                            'callstyle = "async", aggregate = 64, linger = "1ms" }')
    return text


def _sent(tmp: Path, aggregate: bool, transport: str) -> int:
    """Bytes the client sent for 200 calls naming 7 operands of 160 KB in turn, over 2
    replicas that each cache 1 MiB (6 of them)."""
    xs = [np.full(20000, float(j)) for j in range(7)]
    tmp.mkdir()
    with cluster(tmp, _toml(aggregate), replicas=2, transport=transport) as c:
        s = c.session()
        assert bool(s.batchers) == aggregate  # (the lean aggregating path, or none)
        calls = [s.call("scale", (xs[i % 7], i), {}) for i in range(200)]
        assert [float(np.asarray(wait(p))[0]) for p in calls] == [
            float((i % 7) * i) for i in range(200)]
        links = s.links["server"]
        sent = sum(lk.channel.bytes_sent for lk in links)
        if transport == "shm":
            sent += sum(lk.channel.shm_bytes_sent for lk in links)
        return sent


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_aggregated_calls_under_eviction_send_about_what_single_calls_send(
        tmp_path: Path, transport: str) -> None:
    # A new user's trial: cache alone sent 6.7 MB, with aggregate = 64 added 28.7 MB.
    # A batch's own Puts evicted operands it named (the replica's least recently used),
    # a miss named one operand only, and the client believed held every operand it had
    # put: batches missed, went again, missed again and went with values, six copies of
    # 160 KB each. Now a batch puts what its replica lacks, sparing the rest (Put.keep),
    # and the client follows what its Puts evict there: about one Put per batch of six.
    alone = _sent(tmp_path / "alone", False, transport)
    batched = _sent(tmp_path / "batched", True, transport)
    operand = 20000 * 8
    assert alone >= 14 * operand  # (each replica got every operand once, at least)
    assert batched <= 1.5 * alone, (batched, alone)


@pytest.mark.timeout(120)
def test_under_eviction_a_failing_call_fails_alone_and_answers_keep_their_order(
        tmp_path: Path) -> None:
    xs = [np.full(20000, float(j)) for j in range(7)]
    with cluster(tmp_path, _toml(True), replicas=2) as c:
        s = c.session()
        ks = [-1 if i % 10 == 3 else i for i in range(200)]
        calls = [s.call("scale", (xs[i % 7], ks[i]), {}) for i in range(200)]
        for i, p in enumerate(calls):
            if ks[i] < 0:
                with pytest.raises(RemoteException, match="negative scale -1"):
                    wait(p)
            else:
                assert float(np.asarray(wait(p))[0]) == float((i % 7) * i)
