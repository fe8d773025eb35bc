"""Promises inside list, tuple and dict arguments are forwarded as promises of their own
are: ``g([f(x) for x in xs])`` (Dask's ``submit(g, futures)``) is sent at once, and each
value goes from its producer's replica to g's, not through the client.

Each case runs with the same modules under ``forward = false`` too, where the promises
are waited for at the call and the values go through the client: the results are the
same, and only the bytes at the client differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import polybus
from polybus.client.nested import MAX_DEPTH
from polybus.errors import RemoteException

from . import comm_harness
from .comm_harness import Cluster, cluster, heard
from .test_forward_held import outcome

GATHER = '''
def gather(xs, *more, **named):
    # what its arguments hold, each array summed in its place: a list for a list or a
    # tuple (a tuple arrives as a list), a dict for a dict, anything else as it is
    def walk(x):
        if isinstance(x, np.ndarray):
            return float(x.sum())
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return x
    return [walk(xs), [walk(m) for m in more], {k: walk(v) for k, v in named.items()}]

def fail_after(x, flag):
    # a producer that raises once the file ``flag`` exists (`_gate`)
    _gate(flag)
    raise ValueError(f"no good: {float(x.sum())}")
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = {{ callstyle = "async", forward = {fwd} }}
use.fail_after = {{ callstyle = "async", forward = {fwd} }}
use.gather = {{ callstyle = "{consumer}", forward = {fwd}{more} }}

[bind]
"client.gated_double" = "server.gated_double"
"client.fail_after" = "server.fail_after"
"client.gather" = "server.gather"
"""

X = np.arange(32768.0)  # 256 KiB a value: one through the client shows in its bytes
SLACK = 16384  # the small messages of a run: calls, answers, Forwards


@pytest.fixture(autouse=True)
def gather_served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + GATHER)
    yield


def toml(fwd: bool, consumer: str = "async", more: str = "") -> str:
    return TOML.format(fwd=str(fwd).lower(), consumer=consumer, more=more)


def received(c: Cluster) -> int:
    links = [lk for links in c.sessions[-1].links.values() for lk in links]
    return sum(lk.channel.bytes_received for lk in links)


def forwarded(c: Cluster) -> int:
    """Values the replicas sent replica to replica."""
    return sum(rt.forwarding.forwarded for rt in c.runtimes)


Shape = Callable[[list[Any]], tuple[tuple[Any, ...], dict[str, Any]]]

SHAPES: dict[str, Shape] = {
    "list": lambda ps: (([ps[0], ps[1], ps[2]],), {}),
    "dict": lambda ps: (({"a": ps[0], "b": ps[1], "n": 7, "c": ps[2]},), {}),
    "tuple mixed": lambda ps: (((ps[0], 2.5, "s", ps[1], np.ones(3), None, ps[2]),), {}),
    "two deep": lambda ps: (({"k": [ps[0], (ps[1], 3)], "z": [[ps[2]]]},), {}),
    "beside a promise": lambda ps: ((ps[0], [1, ps[1]]), {"q": {"r": (ps[2],)}}),
}

EXPECTED = {
    "list": [[2 * X.sum(), 2 * (X + 1).sum(), 2 * (X + 2).sum()], [], {}],
    "dict": [{"a": 2 * X.sum(), "b": 2 * (X + 1).sum(), "n": 7, "c": 2 * (X + 2).sum()},
             [], {}],
    "tuple mixed": [[2 * X.sum(), 2.5, "s", 2 * (X + 1).sum(), 3.0, None,
                     2 * (X + 2).sum()], [], {}],
    "two deep": [{"k": [2 * X.sum(), [2 * (X + 1).sum(), 3]], "z": [[2 * (X + 2).sum()]]},
                 [], {}],
    "beside a promise": [2 * X.sum(), [[1, 2 * (X + 1).sum()]], {"q": {"r": [2 * (X + 2).sum()]}}],
}


def run(c: Cluster, shape: Shape, fwd: bool) -> Any:
    """Three producers held until the consumer is made (forwarding on: the consumer's
    call must return while they run), their promises passed to gather in ``shape``."""
    s = c.session()
    go = c.tmp / "go"
    ps = [s.call("gated_double", (X + i, str(go)), {}) for i in range(3)]
    if not fwd:
        go.touch()  # (the call waits for them where it is made: they must end)
    args, kwargs = shape(ps)
    g = s.call("gather", args, kwargs)
    if fwd:
        assert not any(p._rec.done for p in ps)  # the call did not wait for them
        heard(c, s, *ps)  # (its Forwards written, as a wait writes them, and read)
        go.touch()
    return outcome(g, within=20)


@pytest.mark.parametrize("name", list(SHAPES))
def test_promises_inside_arguments_go_replica_to_replica(tmp_path: Path, name: str) -> None:
    got = {}
    for fwd in (True, False):
        (tmp_path / str(fwd)).mkdir()
        with cluster(tmp_path / str(fwd), toml(fwd), replicas=2) as c:
            got[fwd] = run(c, SHAPES[name], fwd), received(c), forwarded(c)
            s = c.sessions[-1]
            assert getattr(s, "forwarder", None) is None or s.forwarder.fetched == 0  # type: ignore[attr-defined]
    (on, recv_on, moved_on), (off, recv_off, moved_off) = got[True], got[False]
    assert on == off == EXPECTED[name]
    assert moved_on == 3 and moved_off == 0
    assert recv_on < SLACK, recv_on  # no value came to the client
    assert recv_off > 3 * X.nbytes  # each came to the client, to go on from there


def test_a_failed_producer_among_them_fails_the_consumer_with_its_type(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(True), replicas=2) as c:
        s = c.session()
        go = tmp_path / "go"
        ok = s.call("gated_double", (X, str(go)), {})
        bad = s.call("fail_after", (X + 1, str(go)), {})
        g = s.call("gather", ([ok, {"bad": bad}],), {})  # returns at once
        heard(c, s, ok, bad)
        go.touch()
        with pytest.raises(ValueError) as err:
            outcome(g, within=20)
    assert isinstance(err.value, RemoteException) and err.value.remote_type == "ValueError"
    assert "an upstream call failed" in str(err.value) and "no good" in str(err.value)
    assert "fail_after" in err.value.origin, err.value.origin


def test_a_backlogged_consumer_has_its_nested_values_kept_for_it(tmp_path: Path) -> None:
    # gather is async-demand(1): its first calls fill both windows, so the next waits
    # at the client; its producers' replicas keep the values for it (Keep), not send
    # them to the client, and send them on once it is placed.
    # (two threads for gated_double: the busy calls hold one on each replica, and the
    # producers run on the other while the consumer still waits at the client)
    text = toml(True, "async-demand(1)").replace(
        "replication = 2\n", "replication = 2\ndefine.gated_double = { pool = 2 }\n"
        "define.fail_after = {}\ndefine.gather = {}\n", 1)
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        go, first = tmp_path / "go", tmp_path / "first"
        busy = [s.call("gated_double", (np.zeros(2), str(first)), {}) for _ in range(2)]
        block = [s.call("gather", ([b],), {}) for b in busy]  # (one a replica, held there)
        ps = [s.call("gated_double", (X + i, str(go)), {}) for i in range(3)]
        g = s.call("gather", ({"a": [ps[0], ps[1]], "b": ps[2]},), {})
        assert s.dispatchers["gather"].backlogged == 1
        heard(c, s, *ps)  # (asked to keep them)
        go.touch()
        for _ in polybus.as_completed(ps, timeout=20):
            pass
        assert not any(b.done for b in busy), "the busy calls must hold the windows still"
        assert s.dispatchers["gather"].backlogged == 1  # (its values kept for it meanwhile)
        first.touch()
        assert [outcome(b) for b in block] == [[[0.0], [], {}]] * 2
        assert outcome(g, within=20) == [
            {"a": [2 * X.sum(), 2 * (X + 1).sum()], "b": 2 * (X + 2).sum()}, [], {}]
        assert s.forwarder.keeps == 3  # type: ignore[attr-defined]
        assert received(c) < SLACK


class Trio(NamedTuple):
    a: Any
    b: Any
    c: Any


AGGREGATED: dict[str, Shape] = {
    "list": SHAPES["list"],
    # (a namedtuple alone, or beside another argument: each lean path of batching.py)
    "namedtuple": lambda ps: ((Trio(ps[0], ps[1], ps[2]),), {}),
    "namedtuple beside": lambda ps: ((Trio(ps[0], ps[1], ps[2]), 1), {}),
}


@pytest.mark.parametrize("name", list(AGGREGATED))
def test_an_aggregating_consumer_forwards_them_too(tmp_path: Path, name: str) -> None:
    with cluster(tmp_path, toml(True, more=", aggregate = 4"), replicas=2) as c:
        got = run(c, AGGREGATED[name], True)
        more = [1] if name == "namedtuple beside" else []
        assert got == [EXPECTED["list"][0], more, {}]
        assert forwarded(c) == 3 and received(c) < SLACK


# How the producers' batch stands when the consumer is made: still open (a linger
# longer than the test), so the consumer's Forwards go with it; or written already, full
# at its third call, so they go after it, the first requests this client makes of that
# replica, which reads them before it answers the batch, as it does for a single call.
BATCH = {"open": "aggregate = 4, linger = \"30s\"", "written": "aggregate = 3, linger = \"30s\""}


@pytest.mark.parametrize("batch", list(BATCH))
def test_an_aggregated_producers_promises_inside_a_list_are_forwarded(
        tmp_path: Path, batch: str) -> None:
    more = 'use.gated_double = { callstyle = "async", forward = true }'
    text = toml(True).replace(more, more[:-2] + f", {BATCH[batch]} }}")
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        (bt,) = s.batchers
        go = tmp_path / "go"
        ps = [s.call("gated_double", (X + i, str(go)), {}) for i in range(3)]
        assert (bt.open is not None) == (batch == "open")
        g = s.call("gather", *SHAPES["two deep"](ps))
        assert (bt.open is not None) == (batch == "open")  # (the consumer left it open)
        s.reactor.flush_all()  # (the batch and its Forwards written, as a wait writes them)
        assert bt.unwritten == 0
        go.touch()  # (they answer once the replica has what was sent before)
        assert outcome(g, within=20) == EXPECTED["two deep"]
        assert forwarded(c) == 3 and received(c) < SLACK


@dataclasses.dataclass
class Pair:
    left: Any
    right: Any


def test_a_dataclass_without_pickle_forwards_its_promises_as_its_fields(
        tmp_path: Path) -> None:
    # (it travels as the dict of its fields, and arrives as one)
    with cluster(tmp_path, toml(True), replicas=2) as c:
        got = run(c, lambda ps: ((Pair(ps[0], [ps[1], ps[2]]),), {}), True)
        assert got == [{"left": 2 * X.sum(), "right": [2 * (X + 1).sum(), 2 * (X + 2).sum()]},
                       [], {}]
        assert forwarded(c) == 3 and received(c) < SLACK


class Items(list[Any]):
    """A list subclass: its promises are not looked for (it is no list as sent)."""


def test_a_promise_deeper_than_the_bound_or_in_a_list_subclass_is_waited_for_at_the_call(
        tmp_path: Path) -> None:
    with cluster(tmp_path, toml(True), replicas=2) as c:
        s = c.session()
        go = tmp_path / "go"
        go.touch()  # (waited for at the call: they must end)
        p = s.call("gated_double", (X[:4], str(go)), {})
        deep: Any = [p]
        for _ in range(MAX_DEPTH):
            deep = [deep]
        q = s.call("gated_double", (X[:4], str(go)), {})
        got = polybus.wait(s.call("gather", (deep, Items([q])), {}))
        inner = got[0]
        for _ in range(MAX_DEPTH):
            inner = inner[0]
        assert inner == [12.0] and got[1] == [[12.0]]
        assert forwarded(c) == 0 and s.forwarder.forwarded == 0  # type: ignore[attr-defined]


def test_the_docs_say_a_list_of_promises_is_forwarded() -> None:
    root = Path(__file__).resolve().parents[2]
    row = next(line for line in (root / "docs" / "coming-from.md").read_text().splitlines()
               if line.startswith("| `client.submit(g, fut)`"))
    assert "Not a list of promises" not in row, row
    forward = (root / "docs" / "strategies.md").read_text()
    forward = forward[forward.index("### `forward`"):]
    assert "A promise inside a list, tuple, dict or dataclass argument is still waited" \
        not in forward



TOTAL = """
def total(xs):
    # the sum of a list's items (or a dict's values)
    out = 0
    for v in (list(xs.values()) if isinstance(xs, dict) else xs):
        out = out + v
    return out
"""

LOST = """
[modules.server]
source = "server.py"
replication = 2
define.first = {}
define.total = {}
define.last = { pool = 4 }  # (calls held by a flag leave threads to the rest)

[modules.client]
source = "client.py"
entrypoint = "main"
use.first = { callstyle = "async" }
use.total = { callstyle = "async" }
use.last = { callstyle = "async" }

[bind]
"client.first" = "server.first"
"client.total" = "server.total"
"client.last" = "server.last"
"""


@pytest.mark.parametrize("victim", ["server-0", "server-1"])
@pytest.mark.parametrize("container", ["list", "dict"])
def test_a_stage_given_a_list_lost_after_it_answered_runs_again_with_its_inputs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: str, container: str) -> None:
    # g(k([f(x), 1.0])) on the replica killed once k answered Ref: k runs again, and is
    # sent f's value again (f runs again too) under the key its list now names.
    from .test_forward_lost_stages import STAGES, answered_ref, die, on

    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + STAGES + TOTAL)
    with cluster(tmp_path, LOST, replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        f = on(s, victim, "first", X, str(go))
        k = on(s, victim, "total", [f, 1.0] if container == "list" else {"f": f, "one": 1.0})
        g = on(s, victim, "last", k, str(hold))
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, victim)
        hold.touch()
        assert np.array_equal(outcome(g, within=10), X * 2 + 2)
