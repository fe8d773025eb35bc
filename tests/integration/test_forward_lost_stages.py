"""A stage of a forwarded pipeline whose value is lost with its replica runs again, and
is sent its own forwarded inputs again.

``g(k(f(x)))`` on two replicas: k answered ``Ref`` (its value went to g's replica,
and stayed kept on its own), and the replica holding k's value dies while g still needs
it (g was lost with it, or waits at the client). k runs again elsewhere, as
docs/reliability.md says, naming f's value by the key it named first; the client had let
go of that edge when k first answered, so nothing sent f's value again and k was held on
the replica left for ever, and g with it (a user's 3-stage run on 2 replicas, one
SIGKILLed mid-run, never ended; 2 stages did). Each stage is placed on a chosen replica
and the replica is stopped as a kill would at a known point: once the stage before the
last has answered ``Ref`` and the last is held there by a flag file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.client.session import Session
from polybus.errors import PolybusError, RemoteException
from polybus.wire.codec import Ref

from . import comm_harness
from .comm_harness import Cluster, cluster, heard
from .test_forward_backlog import kill
from .test_forward_held import outcome

STAGES = '''
def first(x, flag):
    # a first stage that answers once ``flag`` exists: every later stage is sent by then
    _gate(flag)
    return x * 2

def last(x, flag):
    # the last stage, held on its replica until ``flag`` exists (the test's kill point)
    _gate(flag)
    return x + 1

def mid(x, k):
    return x * k

def join(x, y):
    return x + y
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.first = {{ idempotent = {first_idempotent} }}
define.mid = {{ idempotent = {mid_idempotent} }}
define.join = {{}}
define.last = {{ pool = 4 }}  # (calls held by a flag leave threads to the rest)

[modules.client]
source = "client.py"
entrypoint = "main"
use.first = {{ callstyle = "async" }}
use.mid = {{ callstyle = "async"{mid_keep} }}
use.join = {{ callstyle = "async" }}
use.last = {{ callstyle = "{last_style}" }}

[bind]
"client.first" = "server.first"
"client.mid" = "server.mid"
"client.join" = "server.join"
"client.last" = "server.last"
"""

X = np.arange(32768.0)  # 256 KiB: a replica reads its client's Forwards before answering


def toml(first_idempotent: bool = True, mid_idempotent: bool = True, mid_keep: bool = False,
         last_style: str = "async") -> str:
    return TOML.format(first_idempotent=str(first_idempotent).lower(),
                       mid_idempotent=str(mid_idempotent).lower(),
                       mid_keep=', forward = "keep"' if mid_keep else "",
                       last_style=last_style)


@pytest.fixture(autouse=True)
def stages(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + STAGES)
    yield


def on(s: Session, where: str, iface: str, *args: Any) -> Any:
    """Call ``iface`` on replica ``where`` (its rotation set to that replica first)."""
    d = s.dispatchers[iface]
    d.policy._next = next(i for i, lk in enumerate(d.links) if lk.name == where)  # type: ignore[attr-defined]
    p = s.call(iface, args, {})
    assert p._rec.link is not None and p._rec.link.name == where, p._rec.link
    return p


def answered_ref(*ps: Any) -> None:
    """Each of ``ps`` has answered ``Ref`` (its value kept on its replica), not fetched."""
    for _ in polybus.as_completed(list(ps), timeout=10):
        pass
    for p in ps:
        assert type(p._rec.value) is Ref, p._rec.value


def die(c: Cluster, name: str) -> None:
    kill(next(rt for rt in c.runtimes if rt.name == name))


OTHER = {"server-0": "server-1", "server-1": "server-0"}


@pytest.mark.parametrize("victim", ["server-0", "server-1"])
@pytest.mark.parametrize("first_on", ["victim", "other"])
def test_three_stages_a_middle_stage_lost_after_it_answered_runs_again(
        tmp_path: Path, victim: str, first_on: str) -> None:
    # The user's case: k and g on the replica killed, f there or on the other.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        f = on(s, victim if first_on == "victim" else OTHER[victim], "first", X, str(go))
        k = on(s, victim, "mid", f, 3)
        g = on(s, victim, "last", k, str(hold))
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, victim)
        hold.touch()
        assert np.array_equal(outcome(g, within=10), X * 6 + 1)


def four_stages(c: Any, s: Any, where: Path) -> tuple[Any, Path]:
    """``last(mid(mid(first(X), 3), 5))``, every stage on server-0, the first three
    answered by reference (kept there); the last held (its flag file returned)."""
    go, hold = where / "go", where / "hold"
    f = on(s, "server-0", "first", X, str(go))
    k = on(s, "server-0", "mid", f, 3)
    h = on(s, "server-0", "mid", k, 5)
    g = on(s, "server-0", "last", h, str(hold))
    heard(c, s, f, k, h)
    go.touch()
    answered_ref(f, k, h)
    return g, hold


def test_four_stages_lost_together_run_again_in_turn(tmp_path: Path) -> None:
    with cluster(tmp_path, toml(), replicas=2) as c:
        g, hold = four_stages(c, c.session(), tmp_path)
        die(c, "server-0")
        hold.touch()
        assert np.array_equal(outcome(g, within=10), X * 30 + 1)


@pytest.mark.parametrize("victim", ["server-0", "server-1"])
def test_fan_in_a_stage_with_two_forwarded_inputs_runs_again(
        tmp_path: Path, victim: str) -> None:
    # g(h(f(x), k(x))): f on the replica killed, k on the other, h and g killed with f.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        f = on(s, victim, "first", X, str(go))
        k = on(s, OTHER[victim], "first", X + 1, str(go))
        h = on(s, victim, "join", f, k)
        g = on(s, victim, "last", h, str(hold))
        heard(c, s, f, k, h)
        go.touch()
        answered_ref(f, k, h)
        die(c, victim)
        hold.touch()
        assert np.array_equal(outcome(g, within=10), X * 4 + 3)


def test_a_value_kept_for_a_backlogged_consumer_lost_makes_its_stage_run_again(
        tmp_path: Path) -> None:
    # The killed replica holds k's value for g, which waits at the client (a demand
    # backlog: each replica's window of one is busy with a call held there).
    with cluster(tmp_path, toml(last_style="async-demand(1)"), replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        busy = on(s, "server-0", "last", 0, str(hold)), on(s, "server-1", "last", 0, str(hold))
        f = on(s, "server-0", "first", X, str(go))
        k = on(s, "server-0", "mid", f, 3)
        g = s.call("last", (k, str(tmp_path / "open")), {})
        assert s.dispatchers["last"].backlogged == 1
        (tmp_path / "open").touch()
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, "server-0")
        hold.touch()
        assert polybus.wait(busy[1]) == 1
        assert np.array_equal(outcome(g, within=10), X * 6 + 1)


def test_a_kept_answer_lost_runs_again_with_its_inputs(tmp_path: Path) -> None:
    # forward = "keep": k's answer stays on its replica while the program holds its
    # promise; that replica dies, k runs again, and needs f's value again.
    with cluster(tmp_path, toml(mid_keep=True), replicas=2) as c:
        s = c.session()
        go = tmp_path / "go"
        f = on(s, "server-0", "first", X, str(go))
        k = on(s, "server-0", "mid", f, 3)
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, "server-0")
        assert np.array_equal(outcome(k, within=10), X * 6)


def test_a_kept_answer_whose_inputs_were_let_go_is_not_run_again_blind(
        tmp_path: Path) -> None:
    # As above, with k's inputs let go (the Lineage's bound): sent again, k would name
    # f's value, which nobody would send it, and wait for ever; it fails instead.
    from polybus.client.fwdlost import Lineage

    with cluster(tmp_path, toml(mid_keep=True), replicas=2) as c:
        s = c.session()
        s.forwarder.lineage = Lineage(calls=0)  # type: ignore[attr-defined]
        go = tmp_path / "go"
        f = on(s, "server-0", "first", X, str(go))
        k = on(s, "server-0", "mid", f, 3)
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, "server-0")
        with pytest.raises(PolybusError) as err:
            outcome(k, within=10)
        assert "WorkerDiedError" in (type(err.value).__name__,
                                     getattr(err.value, "remote_type", "")), err.value


def test_an_upstream_stage_that_may_not_run_again_fails_the_pipeline(tmp_path: Path) -> None:
    # f is not idempotent: k runs again and cannot have f's value, so k fails, and g
    # with it, naming the replica lost; neither waits for ever.
    with cluster(tmp_path, toml(first_idempotent=False), replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        f = on(s, "server-0", "first", X, str(go))
        k = on(s, "server-0", "mid", f, 3)
        g = on(s, "server-0", "last", k, str(hold))
        heard(c, s, f, k)
        go.touch()
        answered_ref(f, k)
        die(c, "server-0")
        hold.touch()
        with pytest.raises(RemoteException) as err:
            outcome(g, within=10)
        assert err.value.remote_type == "WorkerDiedError", err.value
        assert "first is gone (server-0)" in str(err.value), err.value


def test_a_stage_whose_inputs_were_let_go_fails_its_consumers_rather_than_wait(
        tmp_path: Path) -> None:
    # Only the last calls answered Ref keep their inputs (client/fwdlost.py's Lineage):
    # here one, h. k, older, cannot be sent f's value again, so it does not run again:
    # h fails naming k's replica and why, and g with it.
    from polybus.client.fwdlost import Lineage

    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        s.forwarder.lineage = Lineage(calls=1)  # type: ignore[attr-defined]
        g, hold = four_stages(c, s, tmp_path)
        assert s.forwarder.lineage.cut == 1  # type: ignore[attr-defined]
        die(c, "server-0")
        hold.touch()
        with pytest.raises(RemoteException) as err:
            outcome(g, within=10)
        assert err.value.remote_type == "WorkerDiedError", err.value
        said = str(err.value)
        assert "the replica holding the result of a call to mid is gone (server-0)" in said
        assert "the values forwarded to it are no longer known" in said, said


def test_a_long_chain_lost_together_runs_again_without_recursing_stage_by_stage(
        tmp_path: Path) -> None:
    # x = mid(x, 1) 300 times on the replica killed: each stage run again finds its
    # producer's value lost too. Each run again was sent from within its consumer's
    # placing, a Python frame or eight a stage: a RecursionError out of the wait.
    with cluster(tmp_path, toml(), replicas=2) as c:
        s = c.session()
        go, hold = tmp_path / "go", tmp_path / "hold"
        go.touch()
        x = on(s, "server-0", "first", X[:16], str(go))
        chain = [x]
        for _ in range(300):
            x = on(s, "server-0", "mid", x, 1)
            chain.append(x)
        g = on(s, "server-0", "last", x, str(hold))
        for _ in polybus.as_completed(chain, timeout=10):
            pass
        assert sum(type(p._rec.value) is Ref for p in chain) >= 200  # (kept on server-0)
        del chain, x
        die(c, "server-0")
        hold.touch()
        assert np.array_equal(outcome(g, within=30), X[:16] * 2 + 1)
