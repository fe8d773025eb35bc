"""The replica's operand cache (LRU by bytes) and the client's content names."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from polybus.client.naming import content_key
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, CallBatch, Fail
from polybus.worker.cache import OperandCache, resolve, resolve_batch
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES as E


def test_hit_and_miss() -> None:
    c = OperandCache(1000)
    c.put("k", b"x" * 10)
    assert c.get("k") == b"x" * 10
    call = Call(1, "f", [1, Ref("op", "k")], {"z": Ref("op", "k")})
    assert resolve(c, call) is None
    assert call.args == [1, b"x" * 10] and call.kwargs == {"z": b"x" * 10}
    fail = resolve(c, Call(2, "f", [Ref("op", "nope")]))
    assert fail is not None and fail.kind == "cache-miss" and fail.message == "nope"
    assert c.hits == 3 and c.misses == 1


def test_a_batch_resolves_every_call_or_misses_whole() -> None:
    c = OperandCache(1000)
    c.put("b", b"B" * 10)
    batch = CallBatch(7, "f", [[1, Ref("op", "b")], [2, Ref("op", "b")], [3, 4]])
    assert resolve_batch(c, batch) is None
    assert batch.args == [[1, b"B" * 10], [2, b"B" * 10], [3, 4]]
    assert c.hits == 2  # a hit per call naming it (looked up once)
    missing = CallBatch(8, "f", [[1, Ref("op", "b")], [2, Ref("op", "gone")]])
    fail = resolve_batch(c, missing)
    assert fail is not None and (fail.id, fail.kind, fail.message) == (8, "cache-miss", "gone")
    # A Ref that names no cached operand (a forwarded value's, from a confused peer)
    # is a miss too: the batch is not run with a Ref for an argument.
    odd = CallBatch(9, "f", [[Ref("fwd", "k1")]])
    fail = resolve_batch(c, odd)
    assert fail is not None and (fail.kind, fail.message) == ("cache-miss", "k1")
    # One whose key is no key (a forwarded result's list of keys) is a bad call, said so
    # (worker/keylimits.py; it was a miss).
    odd = CallBatch(10, "f", [[1], [Ref("fwd", ["k1", "k2"])]])
    fail = resolve_batch(c, odd)
    assert fail == Fail(10, "bad-call", "TypeError",
                        "call 1's argument 0 is a reference whose key is a list, not a str")


def test_lru_eviction_by_bytes() -> None:
    c = OperandCache(2 * (100 + E) + 50)  # (each entry counts E beside its bytes)
    for k in "ab":
        c.put(k, np.zeros(100, np.uint8))
    c.get("a")  # a is now the most recent; b goes first
    c.put("c", np.zeros(100, np.uint8))
    assert "b" not in c and "a" in c and "c" in c
    assert c.bytes == 2 * (100 + E) and c.evictions == 1


def test_one_oversized_entry_is_kept_alone() -> None:
    c = OperandCache(E + 10)
    c.put("a", b"12345")
    c.put("big", b"x" * 100)
    assert "big" in c and "a" not in c
    c.put("next", b"123")  # (as docs/strategies.md, `cache_bytes`, says) the next put evicts it
    assert "big" not in c and "next" in c and c.bytes == E + 3


def test_content_key_names_content_not_object() -> None:
    a = np.arange(12.0).reshape(3, 4)
    assert content_key(a) == content_key(a.copy())
    assert content_key(a) != content_key(a.reshape(4, 3))       # shape is part of the name
    assert content_key(a) != content_key(a.astype(np.float32))  # and dtype
    assert content_key(a.T) == content_key(np.ascontiguousarray(a.T))
    assert content_key(b"abc") == content_key(bytearray(b"abc"))
    assert content_key([1, 2]) is None
    assert content_key(np.array(1.0)) == content_key(np.array(1.0))


def test_content_key_of_a_large_array_covers_every_byte() -> None:
    a = np.arange(1 << 18, dtype=np.float64)  # 2 MB
    key = content_key(a)
    assert key is not None and len(key) == 32 and int(key, 16) >= 0  # 128 bits, hex
    assert key == content_key(a.copy())
    for i in (0, len(a) // 2, len(a) - 1):  # a change anywhere changes the name
        b = a.copy()
        b[i] += 1
        assert content_key(b) != key
    assert content_key(a.reshape(2, -1)) != key
    assert content_key(a[: len(a) // 2]) != content_key(a[: len(a) // 2 + 1])


def test_a_dropped_connection_frees_what_only_it_used() -> None:
    c = OperandCache(10_000)
    a, b = object(), object()
    c.put("mine", b"1" * 10, a)
    c.put("shared", b"2" * 10, a)
    c.get("shared", b)              # b used it too
    c.put("anon", b"3" * 10)        # no user (kept forwarding results): left to the LRU
    assert resolve(c, Call(1, "f", [Ref("op", "mine")]), a) is None
    assert c.users("shared") == 2
    assert c.release(a) == 1
    assert "mine" not in c and "shared" in c and "anon" in c
    assert c.bytes == 2 * (E + 10) and c.users("shared") == 1
    assert c.release(a) == 0        # twice is harmless
    assert c.release(b) == 1
    assert "shared" not in c and "anon" in c and c.bytes == E + 10


def test_drop_evicts_only_what_no_other_connection_uses() -> None:
    cache = OperandCache()
    me, other = object(), object()
    cache.put("mine", b"x" * 10, me)
    cache.put("both", b"y" * 10, me)
    cache.get("both", other)
    cache.put("theirs", b"z" * 10, other)
    cache.put("kept", b"w" * 10)  # put without a user (a kept forwarding result)
    assert cache.drop(["mine", "both", "theirs", "kept", "unknown"], me) == 1
    assert "mine" not in cache and "both" in cache and "theirs" in cache and "kept" in cache
    assert cache.users("both") == 1
    assert cache.drop(["both"], other) == 1 and "both" not in cache
    assert cache.bytes == 2 * (E + 10)


def test_lru_eviction_forgets_users_and_order_is_kept() -> None:
    c = OperandCache(2 * (100 + E) + 50)
    a, b = object(), object()
    c.put("x", np.zeros(100, np.uint8), a)
    c.put("y", np.zeros(100, np.uint8), b)
    c.get("x", b)                   # x most recent: y goes first
    c.put("z", np.zeros(100, np.uint8), a)
    assert "y" not in c and c.users("y") == 0
    assert c.release(b) == 0        # x is still a's; y is already gone
    assert "x" in c and "z" in c
    c.put("w", np.zeros(100, np.uint8), b)  # LRU order unchanged by release: x goes
    assert "x" not in c and "z" in c and "w" in c
    assert c.release(a) == 1 and list(c._entries) == ["w"]


def test_a_worker_frees_a_dead_clients_operands() -> None:
    import time

    from polybus.transport.channel import Channel
    from polybus.transport.endpoints import connect
    from polybus.wire.codec import Codec
    from polybus.wire.messages import Message, Put, Result
    from polybus.worker.runtime import WorkerRuntime

    token = b"cache-test-token-0123456789abcdef"
    rt = WorkerRuntime("c0", {"size": lambda x: len(x)}, token).start()
    try:
        keep = connect(rt.address, token, Codec())
        gone = connect(rt.address, token, Codec())

        def ask(ch: Channel, *msgs: Message) -> object:
            ch.send_many(list(msgs))
            got = ch.receive()
            while not got:
                got = ch.receive()
            assert isinstance(got[0], Result)
            return got[0].value

        assert ask(keep, Put("both", b"b" * 100), Call(1, "size", [Ref("op", "both")])) == 100
        assert ask(gone, Put("both", b"b" * 100), Put("only", b"o" * 50),
                   Call(1, "size", [Ref("op", "only")])) == 50
        assert "only" in rt.cache and "both" in rt.cache
        gone.close()
        deadline = time.monotonic() + 5
        while "only" in rt.cache and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "only" not in rt.cache and "both" in rt.cache
        keep.close()
    finally:
        rt.stop()


def test_content_key_of_a_large_array_works_in_a_forked_child() -> None:
    """The half-hasher thread does not survive fork(): a child (multiprocessing's default
    on Linux) hashing a large array must not wait on the parent's dead thread forever."""
    import os
    import signal
    import time
    import warnings

    big = np.arange(1 << 18, dtype=np.float64)  # 2 MB: hashed in two halves
    parent_key = content_key(big)  # the parent has started its hashing thread
    other = big + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (fork with threads, 3.12+)
        pid = os.fork()
    if pid == 0:  # the child: hash, report, leave without running pytest's teardown
        code = 1
        try:
            code = 0 if content_key(other) not in (None, parent_key) else 2
        finally:
            os._exit(code)
    done = (0, 0)
    try:
        deadline = time.monotonic() + 30  # a hang guard, not a speed limit
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done[0] == pid, "the child hung hashing a large array"
        assert os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        if done[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_the_replica_cache_is_bounded_by_the_interfaces_that_cache() -> None:
    """One cache per replica: an interface that caches nothing (its cache_bytes is the
    default 512 MiB) used to set the bound, so `cache_bytes = "1MiB"` on the one that
    caches was ignored whenever the module defined another interface."""
    from polybus.config.model import DefineSpec, ModuleSpec
    from polybus.worker.main import options_for

    def spec(**define: DefineSpec) -> ModuleSpec:
        return ModuleSpec(key="srv", source=Path("srv.py"), define=define)

    small = DefineSpec(cache=("b",), cache_bytes=1 << 20)
    assert options_for(spec(first=small, log=DefineSpec()), None, 1 << 30).cache_bytes == 1 << 20
    two = DefineSpec(cache="auto", cache_bytes=4 << 20)
    assert options_for(spec(a=small, b=two, c=DefineSpec()), None, 1 << 30).cache_bytes == 4 << 20
    # Nothing cached (a cache of broadcast operands only): the bound one of them sets.
    # The default of another interface won, and the trial's 6 MiB was ignored.
    said = DefineSpec(cache_bytes=1 << 20, cache_bytes_set=True)
    plain = options_for(spec(f=said, g=DefineSpec()), None, 1 << 30)
    assert plain.cache_bytes == 1 << 20
    plain = options_for(spec(f=DefineSpec(), g=DefineSpec()), None, 1 << 30)
    assert plain.cache_bytes == DefineSpec().cache_bytes  # (none sets one: the default)


def test_a_cache_bytes_in_the_file_or_set_is_marked_as_said(tmp_path: Path) -> None:
    from polybus.config import load

    (tmp_path / "srv.py").write_text("def f(b):\n    return 1\n\n\ndef g():\n    return 2\n")
    (tmp_path / "app.toml").write_text(
        '[modules.srv]\nsource = "srv.py"\ndefine.f = { cache_bytes = "6MiB" }\n'
        'define.g = {}\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n')
    (tmp_path / "c.py").write_text("def main():\n    return 0\n")
    m = load(tmp_path / "app.toml").modules["srv"]
    assert m.define["f"].cache_bytes_set and not m.define["g"].cache_bytes_set
    assert m.cache_bytes == 6 << 20
    m = load(tmp_path / "app.toml", ['modules.srv.define.g.cache_bytes="8MiB"']).modules["srv"]
    assert m.cache_bytes == 8 << 20


def test_a_batch_that_misses_names_every_operand_it_lacks_and_keeps_the_rest() -> None:
    # Stopping at its first miss, the batch named one operand and left the others it
    # names least recently used: the Put that went before it again evicted one of them.
    c = OperandCache(3 * (100 + E))
    for k in "abc":
        c.put(k, b"x" * 100)
    batch = CallBatch(3, "f", [[Ref("op", "gone")], [Ref("op", "a")], [Ref("op", "lost")],
                               [Ref("op", "gone")], [Ref("op", "b")]])
    fail = resolve_batch(c, batch)
    assert fail is not None and (fail.kind, fail.message.split()) == ("cache-miss",
                                                                      ["gone", "lost"])
    assert c.misses == 2  # (each missing operand looked up once)
    c.put("gone", b"g" * 100)  # evicts c, which the batch does not name, not a or b
    assert "c" not in c and "a" in c and "b" in c


def test_a_put_keeps_the_entries_it_is_told_to() -> None:
    c = OperandCache(3 * (100 + E))
    for k in "abc":
        c.put(k, b"x" * 100)
    c.put("d", b"x" * 100, keep=["a", "nope"])  # a is the most recent first: b goes
    assert "a" in c and "b" not in c and "c" in c and "d" in c


def test_a_dict_is_counted_by_what_it_holds() -> None:
    """A broadcast dict (client/broadcastvalue.py) is bounded by its arrays' bytes, not
    its own few hundred: one of 8 MB counted as ~200 B let the cache grow past its bound."""
    c = OperandCache(capacity=10_000)
    c.put("a", {"w": np.zeros(1000)})  # 8000 bytes and the dict
    assert c.bytes > 8000
    c.put("b", {"w": np.zeros(1000)})
    assert "a" not in c and "b" in c  # (the bound evicts as for two arrays)


def test_many_small_operands_hold_about_the_bound_in_memory() -> None:
    """Each entry costs memory beside its value's bytes (its key, its place in the LRU,
    the value's object): counted by the bytes alone, 16-byte operands never dropped
    held ~36 times ``cache_bytes`` before the first left."""
    import os
    import tracemalloc

    cap = 256 * 1024
    c = OperandCache(cap)
    user = object()
    values = [(os.urandom(16).hex(), os.urandom(16)) for _ in range(20_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key, v in values:
            c.put(key, v, user)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert c.evictions > 0 and c.bytes <= cap
    # (the values and keys themselves were made before: what the cache adds, and at
    # most its bound over again for them)
    assert held <= 2 * cap, held
