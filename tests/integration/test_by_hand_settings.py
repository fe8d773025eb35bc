"""Workers started by hand register the settings they apply, and a run at their registry
says each that is not its own (config/workerside.py, client/handsettings.py).

One registry and three workers serve every check: ``server-0`` and ``server-1`` of the
configuration with ``--set``s of their own (a pool of 2, a speed for server-0, a CPU
each), ``server-m`` of ``--module`` (the defaults). Each run names the replicas it
uses in ``replication``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus
from polybus.config.origin import SET
from polybus.errors import ConfigWarning
from polybus.testing.apps import write_one_call_app
from polybus.testing.hosts import by_hand

CPUS = (sorted(os.sched_getaffinity(0)) * 2)[:2]  # (two CPUs this process may use)
WORKERS = ("modules.server.define.f.pool=2",
           'modules.server.replication="server-0:speed=0.5,server-1"',
           f"modules.server.cpus=[[{CPUS[0]}],[{CPUS[1]}]]")
PAIR = 'modules.server.replication="server-0,server-1"'


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    app = write_one_call_app(tmp_path_factory.mktemp("settings"),
                             server_keys='replication = 2\ndefine.f = { pool = 4 }')
    said: list[str] = []
    with by_hand(app, 2, said, sets=WORKERS, modules=["server-m"]) as use:
        yield app, use


def _warned(hand: tuple[Path, list[str]], *sets: str) -> list[str]:
    """The ConfigWarnings of a run (overrides said as --set) at the workers by hand,
    each placed, as a configuration's notes are, at the call of `polybus.run`."""
    app, use = hand
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = polybus.run(app, overrides=list(sets), registry=use[1], token_file=use[3],
                             origin=SET, worker_output=False)
    assert result.result == 1
    mine = [w for w in caught if issubclass(w.category, ConfigWarning)]
    # (it was placed at polybus's own line: session.py, and that line's source shown)
    assert all(w.filename == __file__ for w in mine), [w.filename for w in mine]
    return [str(w.message) for w in mine]


def test_a_run_with_the_workers_own_set_says_nothing(hand: tuple[Path, list[str]]) -> None:
    # (the --set changed the file's pool = 4 to the workers' 2: it was said to reach none)
    assert _warned(hand, *WORKERS) == []


def test_a_run_whose_set_is_not_the_workers_says_so(hand: tuple[Path, list[str]]) -> None:
    # (the file says pool = 4 too: the --set changed nothing, and nothing was said)
    [pool] = _warned(hand, *WORKERS[1:], "modules.server.define.f.pool=4")
    assert pool.startswith("--set: modules.server.define.f.pool: the replicas started by "
                           "hand apply their own define.f.pool: server-0, server-1 have 2 "
                           "where this run's configuration gives 4 (start the workers "
                           "with the same --set"), pool


def test_a_worker_of_module_is_compared_with_the_file(hand: tuple[Path, list[str]]) -> None:
    app, _ = hand
    [pool] = _warned(hand, 'modules.server.replication="server-m"')
    assert pool.startswith(f"{app}:4: modules.server.define.f.pool: the replicas started "
                           "by hand apply their own define.f.pool: server-m has 1 where "
                           "this run's configuration gives 4"), pool


def test_speed_and_cpus_are_compared_by_name(hand: tuple[Path, list[str]]) -> None:
    a, b = CPUS
    found = _warned(hand, WORKERS[0], 'modules.server.replication="server-0,server-1:speed=0.5"',
                    f"modules.server.cpus=[[{b}],[{a}]]")
    speed = next(w for w in found if "their own speed" in w)
    assert speed.startswith("--set: modules.server.replication: ") and (
        "server-0 has 0.5 where this run's configuration gives 1.0; server-1 has 1.0 where "
        "this run's configuration gives 0.5") in speed, speed
    cpus = [w for w in found if "their own cpus" in w]
    if a == b:  # (one CPU: the same for both, and nothing differs)
        assert cpus == [] and len(found) == 1, found
        return
    [said] = cpus
    assert said.startswith("--set: modules.server.cpus: ") and (
        f"server-0 has {a} where this run's configuration gives {b}; server-1 has {b} "
        f"where this run's configuration gives {a}") in said, said
    assert len(found) == 2, found


def test_a_priority_is_the_clients_and_not_compared(hand: tuple[Path, list[str]]) -> None:
    """The client computes each call's priority and a replica of a pool of more than one
    orders its queue by it, whatever its own configuration says (checked by hand: a worker
    of no priority ran a run's queued calls by that run's ``--set`` priority): it was
    said to reach none. (One of a pool of one over shm runs its ring as it comes:
    test_workerside.py.)"""
    assert _warned(hand, *WORKERS, 'modules.server.define.f.priority="x"') == []


def test_pickle_is_the_replicas_own_and_compared(hand: tuple[Path, list[str]]) -> None:
    """A replica's codec takes pickled values or not by its own ``pickle``: a run with
    ``pickle = true`` at workers without it sent a pickled argument, which each replica
    refused, dropping the connection, and the run ended in a PoisonCallError that blamed
    the call. Nothing said why."""
    [said] = _warned(hand, *WORKERS, "modules.server.pickle=true")
    assert said.startswith("--set: modules.server.pickle: the replicas started by hand "
                           "apply their own pickle: server-0, server-1 have false where "
                           "this run's configuration gives true"), said
