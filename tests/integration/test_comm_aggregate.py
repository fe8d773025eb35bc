"""Aggregation (batched calls and answers) and broadcast, end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.errors import RemoteException

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.scale = { callstyle = "async", aggregate = 8, linger = "50ms" }
use.mul = { callstyle = "async" }
use.mul_sync = { callstyle = "sync" }

[bind]
"client.scale" = "server.scale"
"client.mul" = "server.mul"
"client.mul_sync" = "server.mul"
"""


def test_order_and_values_kept(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        out = [s.call("scale", (i, 3), {}) for i in range(200)]
        assert [polybus.wait(p) for p in out] == [3 * i for i in range(200)]
        (batcher,) = s.batchers
        assert batcher.batches >= 200 // 8 - 2  # most calls went in full batches


def test_one_failing_call_fails_alone(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=1) as c:
        s = c.session()
        out = [s.call("scale", (i, -1 if i == 5 else 2), {}) for i in range(16)]
        for i, p in enumerate(out):
            if i == 5:
                with pytest.raises(RemoteException, match="negative scale"):
                    polybus.wait(p)
            else:
                assert polybus.wait(p) == 2 * i


def test_single_call_is_not_held_back(tmp_path: Path) -> None:
    # One call in flight: waiting for it writes it, so no linger is spent.
    with cluster(tmp_path, TOML.replace('"50ms"', '"60s"'), replicas=1) as c:
        s = c.session()
        assert polybus.wait(s.call("scale", (7, 6), {})) == 42


@pytest.mark.parametrize("name", ["mul", "mul_sync"])
def test_broadcast_reaches_every_replica_once(tmp_path: Path, name: str) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random((20, 40)), rng.random((40, 40))
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        h = polybus.broadcast(b)
        sent0 = sum(lk.channel.bytes_sent for lk in s.links["server"])
        rows = [s.call(name, (a[i], h), {}) for i in range(20)]
        assert np.allclose(np.vstack([np.asarray(r) for r in rows]), a @ b)
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"]) - sent0
        assert sent < a.nbytes + 20 * 200  # B itself never travels again
        assert all(len(rt.cache) == 1 for rt in c.runtimes)


def test_an_array_changed_in_place_and_broadcast_again_is_the_new_value(
        tmp_path: Path) -> None:
    """``b[:] = ...; broadcast(b)`` again: the new handle names the new bytes (the name
    used to be remembered per array object, and the replicas kept the old B)."""
    rng = np.random.default_rng(4)
    a, b = rng.random((4, 40)), rng.random((40, 40))
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        first = polybus.broadcast(b)
        assert np.allclose(np.asarray(s.call("mul", (a[0], first), {})), a[0] @ b)
        b[:] = 2.0
        second = polybus.broadcast(b)
        rows = [s.call("mul", (a[i], second), {}) for i in range(4)]
        assert np.allclose(np.vstack([np.asarray(r) for r in rows]), a @ b)


@pytest.mark.parametrize("keyword", [False, True], ids=["lean", "general"])
def test_a_batch_never_outgrows_the_frame_limit(tmp_path: Path, keyword: bool) -> None:
    # Forty calls of 200 KB each fit a 1 MiB frame, but with aggregate = 64 they were
    # packed into one 8 MB batch and the program failed on a message it never made
    # ("message of 8000... bytes is over the frame limit"). A batch now closes before a
    # call would take it past half the limit. Keyword arguments take the general path.
    toml = ("[cluster]\nmax_frame = \"1MiB\"\n" + TOML).replace(
        'use.mul = { callstyle = "async" }',
        'use.mul = { callstyle = "async", aggregate = 64, linger = "50ms" }')
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        rows = [np.full(12_500, float(i)) for i in range(40)]
        b = np.full(12_500, 0.5)
        out = [s.call("mul", (r,), {"b": b}) if keyword else s.call("mul", (r, b), {})
               for r in rows]
        assert [polybus.wait(p) for p in out] == [float(r @ b) for r in rows]
