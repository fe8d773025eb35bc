"""Cached operands that pass a replica's cache bound together: the run's bytes sent.

strategies.md: the operands of one call that do not fit in ``cache_bytes`` together go
with the call, so such a run sends about what it sends uncached; and a batch whose
operands fit the replica's cache (the largest ``cache_bytes`` of its module's
interfaces) is named, even past its own interface's ``cache_bytes``. Before, a single
call Put them, the last Put evicted the first (one operand over the bound is kept
alone), the call missed, was sent again after a Put of that one (which evicted the
other), missed again and went with values: 2.9x the uncached bytes. And a batch whose
operands passed its interface's ``cache_bytes`` went by value though the replica's
cache (512 MiB, another interface's) held them: 3x what single calls sent.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client import dispatch

from .comm_harness import call, cluster
from .test_comm_cache import toml

SERVER = """
import numpy as np

def f(x, y):
    return float(x.sum() + y.sum())

def g(a, b, tag=0):
    return [tag, float(np.asarray(a, dtype=np.float64).sum()),
            float(np.asarray(b, dtype=np.float64).sum())]

def other(x):
    return 0
"""

CLIENT = """
import numpy as np
from polybus import broadcast, use, wait

f = use("f")
g = use("g")


def pair(n=10, shared=False):
    # x, 2.4 MB, is alone over cache_bytes = 2MiB; y is 0.4 MB; both fresh each call
    x = np.zeros(300_000)
    y = np.zeros(50_000)
    out = []
    for i in range(n):
        x[:] = i
        y[:] = i
        out.append(f(broadcast(x) if shared else x, y))
    return out


def table(n=40):
    # a 2 MB operand every fourth call shares, beside a fresh 280 KB one
    big = np.arange(500_000, dtype=np.float32)
    ps = [g(np.full(70_000, i, dtype=np.int32), big, i) for i in range(n)]
    return [wait(p) for p in ps]
"""

APP = """
[modules.server]
source = "server.py"
replication = {replication}
define.f = {{ cache = ["x", "y"], cache_bytes = "2MiB" }}
define.g = {{ cache = ["a", "b"], cache_bytes = "1MiB" }}
define.other = {{ cache = {other} }}

[modules.client]
source = "client.py"
entrypoint = "pair"
use.f = {{ callstyle = "sync" }}
use.g = {{ callstyle = "async" }}

[bind]
"client.f" = "server.f"
"client.g" = "server.g"
"""


def _app(tmp: Path, replication: int = 1, other: str = "[]") -> Path:
    """The app; ``other`` is what define.other caches: with ["x"], its replicas' cache
    is 512 MiB (the default cache_bytes, the largest that caches), else f's 2 MiB."""
    tmp.mkdir(exist_ok=True)
    (tmp / "server.py").write_text(SERVER)
    (tmp / "client.py").write_text(CLIENT)
    app = tmp / "app.toml"
    app.write_text(APP.format(replication=replication, other=other))
    return app


def test_a_call_whose_operands_do_not_fit_in_the_cache_still_runs(tmp_path: Path) -> None:
    # Two 160 KB operands, a cache of 200 KB: Put, one would evict the other, and the
    # call would miss, twice (it did, and went with values after two misses and three
    # Puts). They go with the call at once, and it is answered; nothing is put.
    text = toml(cache='["x", "y"]', cache_bytes=200_000).replace("mul", "add")
    xs = [np.full(20000, float(i)) for i in range(3)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        for i in range(3):
            assert float(call(s, "add", xs[i], xs[(i + 1) % 3])[0]) == i + (i + 1) % 3
        cache = c.runtimes[0].cache
        assert cache.misses == 0 and len(cache) == 0
        sent = sum(lk.channel.bytes_sent for lk in s.links["server"])
        assert sent < 3 * 2 * xs[0].nbytes + 3 * 200  # (each call's two, once)


def test_prefetch_puts_nothing_for_a_call_whose_operands_go_with_it(tmp_path: Path) -> None:
    # prefetch = "all", two replicas: the call's two 160 KB operands pass the 200 KB
    # cache together and go with it by value; the other replica was pushed a Put of each
    # all the same (sent while they were named, before the call was known to go by
    # value): 640 KB more a call, and the client believed that replica held both.
    text = toml(cache='["x", "y"]', cache_bytes=200_000).replace("mul", "add").replace(
        "cache_bytes =", 'prefetch = "all", cache_bytes =')
    xs = [np.full(20000, float(i)) for i in range(3)]
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        for i in range(3):
            assert float(call(s, "add", xs[i], xs[(i + 1) % 3])[0]) == i + (i + 1) % 3
        links = s.links["server"]
        sent = sum(lk.channel.bytes_sent for lk in links)
        assert sent < 3 * 2 * xs[0].nbytes + 3 * 200  # (each call's two, once)
        comm = s.dispatchers["add"].comm
        assert comm is not None and all(not comm.holds(lk) for lk in links)
        assert all(len(rt.cache) == 0 for rt in c.runtimes)  # (nothing was put anywhere)


def test_prefetch_still_puts_the_operands_of_a_call_that_names_them(tmp_path: Path) -> None:
    # prefetch = "all", two replicas, operands that fit the cache together: the Puts of
    # a call's two operands (and of a call's one) go to the other replica too, pushed
    # once the call's naming is done (`Comm._prefetch`), not while it was named.
    text = toml(cache='["x", "y"]', cache_bytes=200_000).replace("mul", "add").replace(
        "cache_bytes =", 'prefetch = "all", cache_bytes =')
    xs = [np.full(2000, float(i)) for i in range(3)]
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        assert float(call(s, "add", xs[0], xs[1])[0]) == 1.0
        comm = s.dispatchers["add"].comm
        assert comm is not None
        keys = [set(comm.holds(lk)) for lk in s.links["server"]]
        assert len(keys[0]) == 2 and keys[0] == keys[1]
        assert float(call(s, "add", xs[2], xs[1])[0]) == 3.0
        keys = [set(comm.holds(lk)) for lk in s.links["server"]]
        assert len(keys[0]) == 3 and keys[0] == keys[1]
        deadline = time.monotonic() + 5  # (the pushes are not answered: they arrive)
        while any(len(rt.cache) < 3 for rt in c.runtimes) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [len(rt.cache) for rt in c.runtimes] == [3, 3]


def _run(app: Path, sets: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    # (every run's call ids start alike: their msgpack widths are the same)
    monkeypatch.setattr(dispatch, "_ids", itertools.count(1000))
    r = polybus.run(app, sets, worker_output=False)
    return r.result, r.bytes_sent


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_calls_operands_past_the_bound_together_go_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str) -> None:
    # Before: 160,016,291 B for 20 calls against 56,002,640 B uncached (2.9x).
    app = _app(tmp_path)
    on = {"modules.server.transport": transport}
    cached, sent = _run(app, on, monkeypatch)
    plain, plain_sent = _run(app, {**on, "modules.server.define.f.cache": []}, monkeypatch)
    assert cached == plain == [float(350_000 * i) for i in range(10)]
    assert plain_sent >= 10 * 2_800_000
    assert sent <= 1.1 * plain_sent, (sent, plain_sent)


@pytest.mark.timeout(120)
def test_a_broadcast_operand_and_one_cached_past_the_bound_go_with_the_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A handle's operand is put once by broadcast(); the call's own Put of y evicted it,
    # it missed, went again after a Put of it (evicting y) and missed again: 2x.
    app = _app(tmp_path)
    shared, sent = _run(app, {"modules.client.kwargs": {"shared": True}}, monkeypatch)
    plain, plain_sent = _run(app, {"modules.server.define.f.cache": []}, monkeypatch)
    assert shared == plain
    x = 300_000 * 8  # (each broadcast() puts x once, beside the call)
    assert sent <= 1.1 * (plain_sent + 10 * x), (sent, plain_sent)


@pytest.mark.timeout(120)
def test_a_batch_whose_operands_fit_the_replicas_cache_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # g's cache_bytes is 1 MiB; the replicas' cache is 512 MiB (define.other caches with
    # the default). A call naming the 2 MB operand and a 280 KB one went in a batch of its
    # own by value, the 2 MB each time: 3x what single calls sent. It is named now.
    app = _app(tmp_path, replication=2, other='["x"]')
    on = {"modules.client.entrypoint": "table"}
    single, sent = _run(app, on, monkeypatch)
    batched, batched_sent = _run(app, {**on, "modules.client.use.g.aggregate": 6},
                                 monkeypatch)
    assert batched == single
    assert [r[0] for r in single] == list(range(40))
    assert sent <= 2 * 2_000_000 + 40 * 300_000  # (the table once to each replica)
    assert batched_sent <= 1.1 * sent, (batched_sent, sent)


@pytest.mark.timeout(120)
def test_a_batch_whose_operands_pass_the_replicas_cache_goes_by_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With the module's cache at 2 MiB (f's, the largest that caches), the 2 MB operand
    # and a 280 KB one never fit at once: single calls and batches alike send them with
    # the call, once each call.
    app = _app(tmp_path, replication=2)
    on = {"modules.client.entrypoint": "table"}
    single, sent = _run(app, on, monkeypatch)
    batched, batched_sent = _run(app, {**on, "modules.client.use.g.aggregate": 6},
                                 monkeypatch)
    assert batched == single
    assert sent <= 1.1 * 40 * 2_280_000, sent
    assert batched_sent <= 1.1 * sent, (batched_sent, sent)
