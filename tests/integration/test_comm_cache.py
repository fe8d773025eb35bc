"""Operand caching end to end: bytes drop, misses repaired, clients interleave safely
(when a cached operand is dropped or hashed again: test_comm_cache_drops.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polybus import wait
from polybus.client.naming import content_key
from polybus.errors import RemoteException

from .comm_harness import call, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1
define.mul = {{ cache = {cache}, cache_bytes = {cache_bytes} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.mul = {{ callstyle = "{style}" }}

[bind]
"client.mul" = "server.mul"
"""


def toml(cache: str = '["b"]', cache_bytes: int = 1 << 26, style: str = "sync") -> str:
    return TOML.format(cache=cache, cache_bytes=cache_bytes, style=style)


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((n, n)), rng.random((n, n))


def test_hit_sends_b_once(tmp_path: Path) -> None:
    a, b = _rows(64, 1)
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        rows = [call(s, "mul", a[i], b) for i in range(64)]
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        cache = c.runtimes[0].cache
        assert np.allclose(np.vstack(rows), a @ b)
        assert cache.hits == 64 and cache.misses == 0 and len(cache) == 1
        # B (32 KiB) once plus 64 rows (512 B each) and headers; stateless would be ~2 MiB.
        assert sent < b.nbytes + a.nbytes + 64 * 200


def test_blocks_of_frozen_matrices_go_once_though_each_call_slices_anew(
        tmp_path: Path) -> None:
    """ep's client: a fresh view ``a[i:i+k]``, ``b[:, j:j+k]`` per task of frozen A and
    B. Cached, each block is sent once (named by its place in A or B, kept while A and B
    live), not once per task that uses it."""
    a, b = _rows(64, 4)
    a.flags.writeable = b.flags.writeable = False
    k = 16
    with cluster(tmp_path, toml(cache='["row", "b"]')) as c:
        s = c.session()
        out = np.empty((64, 64))
        for i in range(0, 64, k):
            for j in range(0, 64, k):  # each call's views are freed before the next
                out[i:i + k, j:j + k] = call(s, "mul", a[i:i + k], b[:, j:j + k])
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        cache = c.runtimes[0].cache
        assert np.allclose(out, a @ b)
        assert len(cache) == 8 and cache.misses == 0  # 4 row blocks, 4 column blocks
        # A and B once each and 16 calls' headers; uncached it would be 4x A and B
        assert sent < a.nbytes + b.nbytes + 16 * 400


def test_auto_caches_large_arguments_only(tmp_path: Path) -> None:
    a, b = _rows(128, 2)  # b is 128 KiB: above the auto threshold; rows are not
    with cluster(tmp_path, toml(cache='"auto"', style="async")) as c:
        s = c.session()
        rows = [s.call("mul", (a[i], b), {}) for i in range(128)]
        assert np.allclose(np.vstack([np.asarray(r) for r in rows]), a @ b)
        assert len(c.runtimes[0].cache) == 1


def test_miss_after_restart_is_resent(tmp_path: Path) -> None:
    a, b = _rows(32, 3)
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        assert np.allclose(call(s, "mul", a[0], b), a[0] @ b)
        c.runtimes[0].cache.clear()  # what a restarted replica has: nothing
        assert np.allclose(call(s, "mul", a[1], b), a[1] @ b)
        assert s.dispatchers["mul"].comm is not None
        assert s.dispatchers["mul"].comm.resent == 1
        assert np.allclose(call(s, "mul", a[2], b), a[2] @ b)
        assert c.runtimes[0].cache.misses == 1


@pytest.mark.parametrize("style", ["sync", "async"])
def test_an_operand_sent_again_after_a_miss_is_the_cached_read_only_one(
        tmp_path: Path, style: str) -> None:
    """A call sent again after a miss (B evicted, or a restarted replica) gets B as a hit
    does: the read-only object the cache holds. It used to carry B inline, so the
    function got a writable array of its own on that call alone, and nothing was kept."""
    from polybus.client.naming import content_key

    a, b = _rows(16, 18)
    text = toml(style=style).replace("mul", "held")
    with cluster(tmp_path, text) as c:
        s = c.session()
        cache = c.runtimes[0].cache
        assert wait(s.call("held", (a[0], b), {}))[0] is True
        cache.clear()  # what a restarted replica has: nothing
        read_only, ident = wait(s.call("held", (a[1], b), {}))
        assert cache.misses == 1 and s.dispatchers["held"].comm.resent == 1  # type: ignore[union-attr]
        assert read_only is True
        assert ident == id(cache.get(content_key(b)))  # kept, and the very object
        assert wait(s.call("held", (a[2], b), {})) == [True, ident]
        assert cache.misses == 1


def test_eviction_keeps_answers_right(tmp_path: Path) -> None:
    # Room for one 32 KiB matrix: alternating two B matrices evicts on every call.
    a, b1 = _rows(64, 4)
    _, b2 = _rows(64, 5)
    with cluster(tmp_path, toml(cache_bytes=40_000, style="async")) as c:
        s = c.session()
        out = [s.call("mul", (a[i], b1 if i % 2 else b2), {}) for i in range(64)]
        want = [a[i] @ (b1 if i % 2 else b2) for i in range(64)]
        assert all(np.allclose(np.asarray(o), w) for o, w in zip(out, want, strict=True))
        cache = c.runtimes[0].cache
        assert cache.evictions > 0 and cache.bytes <= 40_000


def test_two_clients_interleave_different_b(tmp_path: Path) -> None:
    a1, b1 = _rows(48, 6)
    a2, b2 = _rows(48, 7)
    with cluster(tmp_path, toml(style="async"), replicas=2) as c:
        s1, s2 = c.session(), c.session()
        p1, p2 = [], []
        for i in range(48):  # both clients' calls alternate on the same replicas
            p1.append(s1.call("mul", (a1[i], b1), {}))
            p2.append(s2.call("mul", (a2[i], b2), {}))
        assert np.allclose(np.vstack([np.asarray(p) for p in p1]), a1 @ b1)
        assert np.allclose(np.vstack([np.asarray(p) for p in p2]), a2 @ b2)
        assert all(len(rt.cache) == 2 for rt in c.runtimes)


def test_no_cache_is_identical(tmp_path: Path) -> None:
    a, b = _rows(16, 8)
    with cluster(tmp_path, toml(cache="[]")) as c:
        s = c.session()
        assert s.dispatchers["mul"].comm is None
        got = np.vstack([call(s, "mul", a[i], b) for i in range(16)])
    with cluster(tmp_path, toml()) as c:
        s = c.session()
        got2 = np.vstack([call(s, "mul", a[i], b) for i in range(16)])
    assert np.array_equal(got, got2)


RO_TOML = """
[modules.server]
source = "server.py"
replication = 1
define.mul = { cache = ["b"] }
define.bump = { cache = ["b"] }

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.mul" = "server.mul"
"client.bump" = "server.bump"
"""


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_cached_operand_is_read_only_on_every_transport(tmp_path: Path,
                                                          transport: str) -> None:
    """Every call naming B's content gets the replica's one copy: a function that writes
    it in place fails alone (the same error whichever transport carried B), and B stays
    as it was for the calls after."""
    a, b = _rows(16, 9)
    with cluster(tmp_path, RO_TOML, transport=transport) as c:
        s = c.session()
        assert np.allclose(call(s, "mul", a[0], b), a[0] @ b)
        with pytest.raises(RemoteException) as err:
            call(s, "bump", a[1], b)
        assert err.value.remote_type == "ValueError"
        assert "read-only" in str(err.value)
        assert np.allclose(call(s, "mul", a[2], b), a[2] @ b)
        assert c.runtimes[0].cache.hits >= 2


def test_a_stolen_call_names_its_cached_operand(tmp_path: Path) -> None:
    # Replica 0 gets the slow calls (round-robin, even ones), so the idle replica 1 steals
    # from it; a moved call goes by name, with a Put if its new replica lacks the operand,
    # never with the operand inline.
    x = np.arange(1 << 17, dtype=np.float64)  # 1 MiB
    cfg = toml(style="async").replace("define.mul =", "define.nap =").replace(
        'use.mul = { callstyle = "async" }', 'use.nap = { callstyle = "async", balance = "steal" }'
    ).replace('"client.mul" = "server.mul"', '"client.nap" = "server.nap"')
    cfg = cfg.replace('cache = ["b"]', 'cache = ["x"]')
    with cluster(tmp_path, cfg, replicas=2) as c:
        s = c.session()
        ps = [s.call("nap", (x, 0.05 if i % 2 == 0 else 0.0), {}) for i in range(12)]
        assert all(np.array_equal(np.asarray(p), x) for p in ps)
        migrator = s.migrators[0]
        assert sum(migrator.moved_in.values()) > 0  # something did move
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        assert sent < 2 * x.nbytes + 64 * 1024  # x once per replica, whatever moved


@pytest.mark.parametrize(("cache", "expected"), [
    ('["b"]', [False, [False, False], True, {"e": False}]),
    ('["a"]', [True, [False, False], False, {"e": False}]),
    ('["rest"]', [False, [True, True], False, {"e": False}]),
    ('["extra"]', [False, [False, False], False, {"e": True}]),
])
def test_cache_finds_each_kind_of_parameter(tmp_path: Path, cache: str,
                                            expected: list[object]) -> None:
    # kinds(a, *rest, b=None, **extra): a keyword-only parameter is not a position (b
    # named the first of *rest), *args caches every extra position, **kwargs every
    # keyword no other parameter takes.
    text = toml().replace("define.mul", "define.kinds").replace('["b"]', cache)
    text = text.replace("use.mul", "use.kinds").replace('"client.mul" = "server.mul"',
                                                        '"client.kinds" = "server.kinds"')
    x = [np.full(4, float(i)) for i in range(5)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        got = wait(s.call("kinds", (x[0], x[1], x[2]), {"b": x[3], "e": x[4]}))
        assert got == [*expected, 40.0]  # (and every value arrived: 4 * (0+1+2+3+4))


@pytest.mark.parametrize(("cache", "expected"), [
    ('["a"]', [True, {"a": False}]),
    ('["extra"]', [False, {"a": True}]),
])
def test_cache_tells_a_positional_only_name_from_a_keyword_of_kwargs(
        tmp_path: Path, cache: str, expected: list[object]) -> None:
    # kinds_po(a, /, **extra) called kinds_po(x0, a=x1): the keyword a is not the
    # parameter a (positional-only) but an entry of **extra, so cache = ["a"] caches x0
    # alone, and cache = ["extra"] caches x1 ("every keyword no other parameter takes").
    text = toml().replace("define.mul", "define.kinds_po").replace('["b"]', cache)
    text = text.replace("use.mul", "use.kinds_po").replace(
        '"client.mul" = "server.mul"', '"client.kinds_po" = "server.kinds_po"')
    x = [np.full(4, float(i)) for i in range(2)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        assert wait(s.call("kinds_po", (x[0],), {"a": x[1]})) == expected


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_async_calls_naming_a_held_frozen_operand_skip_the_general_path(
        tmp_path: Path, transport: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the replica holds a frozen B, an async call names it without the general
    path (Comm.quick); a miss (a restarted replica) is still repaired, and a new B still
    goes in a Put first (on the quick path too: client/quickname.py)."""
    from polybus.client.operands import Comm

    general = []
    messages = Comm.messages
    monkeypatch.setattr(Comm, "messages", lambda self, rec, *a, **k: (
        general.append(rec.id), messages(self, rec, *a, **k))[1])
    a, b = _rows(16, 21)
    a.flags.writeable = b.flags.writeable = False
    with cluster(tmp_path, toml(style="async"), transport=transport) as c:
        s = c.session()
        got = [s.call("mul", (a[i], b), {}) for i in range(8)]
        assert np.allclose(np.array([wait(p) for p in got]), a[:8] @ b)
        assert len(general) == 1  # the first call, with its Put; the 7 others named B
        c.runtimes[0].cache.clear()  # what a restarted replica has: nothing
        got = [s.call("mul", (a[i], b), {}) for i in range(8, 16)]
        assert np.allclose(np.array([wait(p) for p in got]), a[8:] @ b)
        assert c.runtimes[0].cache.misses >= 1
        assert s.dispatchers["mul"].comm.resent >= 1  # type: ignore[union-attr]
        _, b2 = _rows(16, 22)
        b2.flags.writeable = False
        before, misses = len(general), c.runtimes[0].cache.misses
        assert np.allclose(wait(s.call("mul", (a[0], b2), {})), a[0] @ b2)
        assert len(general) == before  # a new frozen operand: its Put, on the quick path
        assert content_key(b2) in c.runtimes[0].cache  # (put there first)
        assert c.runtimes[0].cache.misses == misses  # (and so named without a miss)
