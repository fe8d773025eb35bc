"""Calls a client makes to one replica reach it in the order the program made them, on
whatever bindings, whatever `aggregate` and `linger` pack them into: aggregation
changes how calls travel, never what a program computes. (An aggregated `put` used to
wait in its open or held batch while a later `get` of another binding went at once:
the same program counted 4 or 11 missing keys instead of 0, by configuration alone.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import polybus
from polybus.cli.main import main as cli
from polybus.testing.apps import write_app

KV = """
_d = {}
_log = []


def put(key, value):
    _d[key] = value
    _log.append(("put", key))


def get(key):
    _log.append(("get", key))
    return _d.get(key)


def log():
    return list(_log)
"""
CLIENT = """
from polybus import use, wait

put = use("put")
get = use("get")


def main(n=20):
    for i in range(n):
        put(f"k{i}", i)
    return wait([get(f"k{i}") for i in range(n)]).count(None)
"""
TOML = """
[modules.kv]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.put = { callstyle = "async" }
use.get = { callstyle = "async" }

[bind]
"client.put" = "kv.put"
"client.get" = "kv.get"
"""
PUT = "modules.client.use.put.aggregate"
GET = "modules.client.use.get.aggregate"


@pytest.mark.parametrize("sets", [[f"{PUT}=8"], [f"{PUT}=8", f"{GET}=8"], [f"{GET}=8"]],
                         ids=["put", "both", "get"])
def test_every_get_finds_the_put_made_before_it(tmp_path: Path, sets: list[str]) -> None:
    app = write_app(tmp_path, server=KV, client=CLIENT, toml=TOML)
    sets = [*sets, "modules.kv.replication=1"]
    assert polybus.run(app, sets, worker_output=None).result == 0


def test_a_sweep_over_aggregate_finds_no_differing_result(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = write_app(tmp_path, server=KV, client=CLIENT, toml=TOML)
    js = tmp_path / "s.json"
    rc = cli(["sweep", str(app), "--vary", f"{PUT}=1,8", "--vary", f"{GET}=1,8",
              "--repeat", "1", "--quiet", "--json", str(js)])
    out = capsys.readouterr().out
    d = json.loads(js.read_text())
    assert d["results_differ"] is False, out
    assert "results: the same in every combination" in out
    assert rc == 0


# Three bindings of one module interleaved, each aggregated with its own size (one a
# size in bytes) and a linger, one under async-demand with a window its batches never
# fill (its backlog may reorder by design: docs/reliability.md), beside a plain async
# one: the replica logs the order it ran them in, which must be the program's.
INTERLEAVED = """
from polybus import use, wait

put = use("put")
get = use("get")
put2 = use("put2")
log = use("log")


def main(n=300):
    made = []
    for i in range(n):
        k = f"k{i % 7}"
        if i % 5 == 0:
            get(k)
            made.append(["get", k])
        elif i % 3 == 0:
            put2(k, i)
            made.append(["put", k])
        else:
            put(k, i)
            made.append(["put", k])
        if i % 11 == 0:
            for _ in range(i % 4):  # runs of one binding too, which batches keep whole
                put(k, i)
                made.append(["put", k])
    return [list(e) for e in wait(log())] == made
"""
INTERLEAVED_TOML = """
[modules.kv]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.put = { callstyle = "async", aggregate = 8, linger = "20ms" }
use.put2 = { callstyle = "async-demand(1000)", aggregate = "1KiB", linger = "5ms" }
use.get = { callstyle = "async", aggregate = 3, linger = "1s" }
use.log = { callstyle = "async" }

[bind]
"client.put" = "kv.put"
"client.put2" = "kv.put"
"client.get" = "kv.get"
"client.log" = "kv.log"
"""


def test_interleaved_aggregated_bindings_run_in_the_order_made(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=KV, client=INTERLEAVED, toml=INTERLEAVED_TOML)
    r = polybus.run(app, worker_output=None)
    assert r.result is True
    put = r.interfaces["client.put"]  # (its runs still went in batches of several calls)
    assert put["batched_calls"] == put["calls"] and put["batches"] < put["calls"]


# A call given a promise waits for its value (on its replica, or at the client with
# forward = false), but not ahead of what the program made before it: the `put` in
# its open batch reaches the replica first.
FORWARDED = """
from polybus import use, wait

put = use("put")
ident = use("ident")
get_after = use("get_after")


def main(n=40):
    out = []
    for i in range(n):
        v = ident(i)
        put(f"k{i}", i)
        out.append(get_after(v, f"k{i}"))
    return wait(out) == list(range(n))
"""
FORWARDED_TOML = """
[modules.kv]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.put = {{ callstyle = "async", aggregate = 8, linger = "1s" }}
use.ident = {{ callstyle = "async", forward = {fwd} }}
use.get_after = {{ callstyle = "async", forward = {fwd} }}

[bind]
"client.put" = "kv.put"
"client.ident" = "kv.ident"
"client.get_after" = "kv.get_after"
"""
KV_MORE = KV + """

def ident(x):
    return x


def get_after(v, key):
    return _d.get(key)
"""


@pytest.mark.parametrize("fwd", ["true", "false"])
def test_a_call_given_a_promise_runs_after_the_calls_made_before_it(
        tmp_path: Path, fwd: str) -> None:
    app = write_app(tmp_path, server=KV_MORE, client=FORWARDED,
                    toml=FORWARDED_TOML.format(fwd=fwd))
    r = polybus.run(app, worker_output=None)
    assert r.result is True
    if fwd == "true":  # (the values went replica to replica)
        assert r.interfaces["client.get_after"]["forwarded"] + \
            r.interfaces["client.ident"]["forwarded"] > 0


ALTERNATE = """
from polybus import use

put = use("put")
get = use("get")


def main(n=20):
    missed = 0
    for i in range(n):
        put(f"k{i}", i)  # (its promise left alone: a look at it would wait for it)
        missed += get(f"k{i}") is None
    return missed
"""


@pytest.mark.parametrize("priority", [False, True])
def test_a_sync_call_runs_after_the_held_calls_made_before_it(
        tmp_path: Path, priority: bool) -> None:
    """With a priority, aggregated calls are held per replica on the general path: a
    sync call wrote itself ahead of them (every get missed its put)."""
    app = write_app(tmp_path, server=KV, client=ALTERNATE, toml=TOML)
    sets = [f"{PUT}=8", 'modules.client.use.get.callstyle="sync"']
    if priority:
        sets.append('modules.kv.define.put.priority="0"')
    assert polybus.run(app, sets, worker_output=None).result == 0


# Two replicas: each runs the calls it was given in the order they were made, whichever
# bindings they came by (each call answers its replica's pid and how many calls that
# replica had run before it).
TICKS = """
import os
import itertools

_n = itertools.count()


def tick(i):
    return [os.getpid(), next(_n), i]
"""
TICKING = """
from polybus import use, wait

names = ["a", "b", "c", "d"]
calls = {n: use(n) for n in names}


def main(n=400):
    out = []
    for i in range(n):
        name = names[(i * 7 + i // 5) % 4] if i % 9 else "a"
        out.append(calls[name](i))
    by_replica = {}
    for pid, seq, i in wait(out):
        by_replica.setdefault(pid, []).append((seq, i))
    return [sorted(runs) == sorted(runs, key=lambda r: r[1]) for runs in by_replica.values()]
"""
TICKING_TOML = """
[modules.kv]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.a = { callstyle = "async", aggregate = 8, linger = "20ms" }
use.b = { callstyle = "async", aggregate = 3, linger = "1s" }
use.c = { callstyle = "async" }
use.d = { callstyle = "async-demand(1000)", aggregate = "1KiB", linger = "5ms" }

[bind]
"client.a" = "kv.tick"
"client.b" = "kv.tick"
"client.c" = "kv.tick"
"client.d" = "kv.tick"
"""


def test_each_replica_runs_its_calls_in_the_order_made(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=TICKS, client=TICKING, toml=TICKING_TOML)
    assert polybus.run(app, worker_output=None).result == [True, True]
