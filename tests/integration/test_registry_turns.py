"""Clients sharing a registry take turns, as clients of one name server do: each run
against workers started by hand starts its calls at the replica after the previous
run's, so clients of one call each spread over the replicas rather than all queueing
at the first while the others idle."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.client.session import Session

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = 3
define.double = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "async" }

[bind]
"client.double" = "server.double"
"""

ONE_CALL = ("from polybus import use, wait\n\ndouble = use('double')\n\n"
            "def main(k=1):\n    return wait([double(i) for i in range(k)])\n")


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(1)"])
def test_runs_of_one_call_each_go_round_the_replicas(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    with cluster(tmp_path, TOML, replicas=3) as c:
        (tmp_path / "client.py").write_text(ONE_CALL)
        monkeypatch.setenv("POLYBUS_TOKEN", c.token.decode())
        sets = {"modules.client.use.double.callstyle": style}
        seen = []
        for _ in range(4):
            r = polybus.run(c.path, registry=str(c.registry.address), overrides=sets)
            assert r.result == [0]
            seen.append([rt.calls for rt in c.runtimes])
        # each run's one call at the next replica, the fourth round to the first again
        assert seen == [[1, 0, 0], [1, 1, 0], [1, 1, 1], [2, 1, 1]]


def test_a_run_of_several_calls_starts_at_its_turn_and_rotates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with cluster(tmp_path, TOML, replicas=3) as c:
        (tmp_path / "client.py").write_text(ONE_CALL)
        monkeypatch.setenv("POLYBUS_TOKEN", c.token.decode())
        reg = str(c.registry.address)
        assert polybus.run(c.path, registry=reg, overrides={
            "modules.client.args": [1]}).result == [0]
        r = polybus.run(c.path, registry=reg, overrides={"modules.client.args": [4]})
        assert r.result == [0, 2, 4, 6]
        # the second run began at server-1: 1, 2, 0, 1
        assert [rt.calls for rt in c.runtimes] == [2, 2, 1]
        assert [s.calls for s in r.replicas] == [1, 2, 1]  # (the run's own)


def test_a_session_of_a_runs_own_registry_starts_at_the_first(tmp_path: Path) -> None:
    """No turn is taken where the registry is the run's own (the local engine's, and
    a Session made without ``turn``): its calls begin at server-0 as the configuration
    lists the replicas, however many sessions came before."""
    with cluster(tmp_path, TOML, replicas=3) as c:
        for _ in range(2):
            s = c.session()
            polybus.wait(s.call("double", (1,), {}))
        assert [rt.calls for rt in c.runtimes] == [2, 0, 0]


@pytest.mark.parametrize(("count", "calls"), [(1, [1, 1, 1]), (2, [2, 2, 2])])
def test_clients_using_fewer_replicas_than_registered_take_the_next_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, calls: list[int]
        ) -> None:
    """A client whose replication asks for fewer than are registered (one each, as a
    client given one server by the name server) takes them from its turn on: three
    such runs use every replica, where each used server-0 (and server-1)."""
    with cluster(tmp_path, TOML, replicas=3) as c:
        (tmp_path / "client.py").write_text(ONE_CALL)
        monkeypatch.setenv("POLYBUS_TOKEN", c.token.decode())
        used = []
        for _ in range(3):
            r = polybus.run(c.path, registry=str(c.registry.address), overrides={
                "modules.server.replication": count, "modules.client.args": [count]})
            assert r.result == [0, 2][:count]
            used.append([s.name for s in r.replicas])
        assert [rt.calls for rt in c.runtimes] == calls
        assert used == ([["server-0"], ["server-1"], ["server-2"]] if count == 1 else
                        [["server-0", "server-1"], ["server-2", "server-0"],
                         ["server-1", "server-2"]])


@pytest.mark.parametrize("replication", ["server-0#server-1", "server-0(oc=(load>=2))#server-1:[1]"])
def test_replicas_named_by_a_migration_path_are_kept_at_every_turn(
        tmp_path: Path, replication: str) -> None:
    """A path between replicas of the default names (``server-0#server-1``) ties the
    calls' moves to those names: every client takes them, whatever its turn, and moves
    calls along the path. (Taken for a count, a client's turn gave it server-2 and
    server-0, and the path, naming a replica it had not dialled, moved nothing.)"""
    toml = TOML.replace("replication = 3", f'replication = "{replication}"')
    with cluster(tmp_path, toml, replicas=2) as c:
        c.start_replica("server-2")  # (a third registered: one to spare)
        for _ in range(3):
            s = Session(c.app, str(c.registry.address), c.token, turn=True)
            c.sessions.append(s)
            assert [lk.name for lk in s.links["server"]] == ["server-0", "server-1"]
            assert len(s.migrators) == 1


@pytest.mark.parametrize("names", ["server-0", "server-1", "server-0,server-1",
                                   "server-2,server-0"])
def test_a_replication_of_names_uses_those_at_every_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        names: str) -> None:
    """A replication given as names uses the replicas registered under them, whatever
    the names: ``"server-0"``, the name ``replication = 1`` makes, was taken for that
    count, and runs went server-0, server-1, server-0 by their turns (while
    ``"server-1"`` kept to server-1), and the warning said ``replication = 1``."""
    wanted = names.split(",")
    toml = TOML.replace("replication = 3", f'replication = "{names}"')
    with cluster(tmp_path, toml, replicas=3) as c:
        (tmp_path / "client.py").write_text(ONE_CALL)
        monkeypatch.setenv("POLYBUS_TOKEN", c.token.decode())
        used = []
        for _ in range(3):
            r = polybus.run(c.path, registry=str(c.registry.address),
                            overrides={"modules.client.args": [len(wanted)]})
            used.append(sorted(s.name for s in r.replicas if s.calls))
        assert used == [sorted(wanted)] * 3, used
        assert [rt.name for rt in c.runtimes if rt.calls] == sorted(wanted)
    said = [r.getMessage() for r in caplog.records if "replicas registered" in r.getMessage()]
    assert said and f'replication = "{names}"; using' in said[0], said
    assert "name them in replication to use them all" in said[0], said
