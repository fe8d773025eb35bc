"""A cached operand sent over shm to several replicas travels in one shared segment:
copied once by the client, mapped read-only by every replica, kept while a replica's
cache holds it, reused (warm, or without a copy for the same content) once released."""

from __future__ import annotations

import gc
import socket
import weakref
from pathlib import Path

import numpy as np
import pytest

from polybus.client.naming import content_key
from polybus.testing.conformance import memfd_mappings
from polybus.transport.shm import ShmChannel
from polybus.transport.shmshare import shelf
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Put, Result

from .comm_harness import call, cluster
from .test_comm_cache import toml

N = 200  # B is 320 KB: above the shm threshold, so it goes by segment


def _pairs(k: int) -> list[tuple[ShmChannel, ShmChannel]]:
    out = []
    for _ in range(k):
        a, b = socket.socketpair(socket.AF_UNIX)
        out.append((ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")))
    return out


def _one(ch: ShmChannel) -> Message:
    msgs = list(ch.receive())
    assert len(msgs) == 1
    return msgs[0]


def _ack(client: ShmChannel, replica: ShmChannel) -> None:
    """A round trip: releases the replica noted ride back on its frame."""
    replica.send(Result(0, None))
    assert isinstance(_one(client), Result)


def test_one_copy_for_every_replica_read_only_and_released() -> None:
    pairs = _pairs(3)
    b = np.random.default_rng(1).random((N, N))
    copies = shelf().copies
    try:
        for c, _ in pairs:
            c.send(Put("k-one", b))
        got = []
        for _, r in pairs:
            m = _one(r)
            assert isinstance(m, Put)
            got.append(m.value)
        assert shelf().copies == copies + 1  # one copy, three replicas
        for v in got:
            assert np.array_equal(v, b) and not v.flags.writeable
            with pytest.raises(ValueError):
                v[0, 0] = 1.0
        assert all(c._lent for c, _ in pairs)  # held while any replica views it
        del v, got, m
        gc.collect()
        for c, r in pairs:
            _ack(c, r)
        assert not any(c._lent for c, _ in pairs)
        # The same content again: the segment still has it, no copy.
        for c, _ in pairs:
            c.send(Put("k-one", b))
        for _, r in pairs:
            assert np.array_equal(_one(r).value, b)  # type: ignore[attr-defined]
        assert shelf().copies == copies + 1
        gc.collect()
        # Other large buffers still go by each channel's own (writable) segments.
        c, r = pairs[0]
        c.send(Call(1, "f", [b]))
        m = _one(r)
        assert isinstance(m, Call) and m.args[0].flags.writeable
        del m
    finally:
        for c, r in pairs:
            c.close()
            r.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_a_closed_channel_never_lets_its_segment_be_reused() -> None:
    (c1, r1), (c2, r2) = _pairs(2)
    b = np.random.default_rng(2).random((N, N))
    try:
        c1.send(Put("k-two", b))
        c2.send(Put("k-two", b))
        kept = _one(r1).value  # type: ignore[attr-defined]  # r1's side keeps its array
        assert np.array_equal(_one(r2).value, b)  # type: ignore[attr-defined]
        gc.collect()
        _ack(c2, r2)
        c1.close()  # its peer may still view the segment: it must never be written again
        copies = shelf().copies
        other = np.random.default_rng(3).random((N, N))
        c2.send(Put("k-three", other))
        assert np.array_equal(_one(r2).value, other)  # type: ignore[attr-defined]
        assert shelf().copies == copies + 1
        assert np.array_equal(kept, b)  # untouched
        del kept
    finally:
        for ch in (c1, r1, c2, r2):
            ch.close()
    gc.collect()
    assert memfd_mappings() == 0


def test_replicas_share_b_end_to_end(tmp_path: Path) -> None:
    a = np.random.default_rng(4).random((8, N))
    with cluster(tmp_path, toml(style="async"), replicas=2, transport="shm") as c:
        s = c.session()
        copies = shelf().copies
        for seed in range(3):  # a fresh B each round; the old one is dropped
            b = np.random.default_rng(10 + seed).random((N, N))
            got = [s.call("mul", (a[i], b), {}) for i in range(8)]
            assert np.allclose(np.vstack([np.asarray(g) for g in got]), a @ b)
            del got, b
        assert shelf().copies - copies == 3  # once a round, not once per replica
        assert all(len(rt.cache) == 1 for rt in c.runtimes)
    del c  # (its stopped replicas' caches still hold their arrays)
    gc.collect()
    assert memfd_mappings() == 0


SCRIBBLE = '''
[modules.server]
source = "server.py"
replication = 1
define.scale = { cache = ["x"] }

[modules.client]
source = "client.py"
entrypoint = "main"
use.scale = { callstyle = "sync" }

[bind]
"client.scale" = "server.scale"
'''


def test_a_replica_cannot_write_a_shared_operand(tmp_path: Path) -> None:
    # What a replica holds another may read: the cached array is read-only there.
    x = np.ones(N * N)
    with cluster(tmp_path, SCRIBBLE, transport="shm") as c:
        s = c.session()
        assert np.array_equal(call(s, "scale", x, 2.0), x * 2)
        rt = c.runtimes[0]
        held = rt.cache.get(str(content_key(x)))
        assert not held.flags.writeable
        with pytest.raises(ValueError):
            held *= 2
        del held, rt
    del c
    gc.collect()
    assert memfd_mappings() == 0


def test_a_closed_channel_is_not_kept_alive_by_the_segment_it_lent() -> None:
    """A channel that passed an operand's segment is noted on it (to be told to forget
    it when it closes), weakly: once the channel is closed and let go, it is freed, its
    decoder's memory with it, while the segment lives on for other channels. Before, the
    note held the channel itself, so every closed connection of a client sending the
    same operand stayed in memory as long as that segment."""
    b = np.arange(N * N, dtype=np.float64)
    (keep_tx, keep_rx), (tx, rx) = _pairs(2)
    try:
        for t, r in ((keep_tx, keep_rx), (tx, rx)):
            t.send(Put("k-weak-peer", b))
            assert isinstance(_one(r), Put)
        ref = weakref.ref(tx)
        tx.close()
        rx.close()
        del tx, rx, t, r
        gc.collect()
        assert ref() is None
        assert keep_tx._lent  # (while the segment lives on, held for the other channel)
    finally:
        keep_tx.close()
        keep_rx.close()
