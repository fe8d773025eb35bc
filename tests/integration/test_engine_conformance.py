"""Every engine passes the same checks (polybus/testing/engines.py): the same programs
give the same answers and the same errors, started locally, under mpiexec or as Ray
actors.

The ray engine's runs of the checks join one Ray head of the module's (started once on
each test process, on loopback only: testing/rayhead.py), as runs on a Ray cluster do;
a Ray of each run's own, started and ended with it, took most of each run's time. A run
that starts a private Ray is checked too (`test_a_private_ray_takes_more_replicas_than_cores`,
and test_engine_ray_output.py)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from polybus.bench.peers._driver import loopback_only_prefix
from polybus.testing.engines import CASES, DEATH, ENGINES, Case, check, unavailable
from polybus.testing.rayhead import RayHead, ray_head

from .conftest import descendants, wait_gone

ACTORS_GONE_S = 30.0  # for a joined run's actors to end once it has ended (Ray kills them)


def ray_slow(engines: Sequence[str]) -> list[Any]:
    """The engines, Ray's marked slow: Ray's start, and each actor's, take seconds."""
    return [pytest.param(e, marks=pytest.mark.slow) if e == "ray" else e for e in engines]


@pytest.fixture(scope="module")
def joined_ray() -> Iterator[RayHead | None]:
    """The Ray head the module's ray runs join (2 CPUs over what a run asks, so that no
    run's actors wait for the CPUs of the last run's, which Ray frees as it kills them);
    None where no command can enter its namespace (each run then starts a private Ray,
    as a run without $RAY_ADDRESS does)."""
    if why := unavailable("ray"):
        pytest.skip(f"ray engine: {why}")
    with ray_head(loopback_only_prefix(), cpus=4) as head:
        if head.enterable():
            yield head
            return
    yield None  # (the head ended: nothing of it left beside the private Rays)


def _head(engine: str, request: pytest.FixtureRequest) -> RayHead | None:
    """The head a run of ``engine`` joins: `joined_ray` under ray (started at the first
    that asks), else None."""
    if why := unavailable(engine):
        pytest.skip(f"{engine} engine: {why}")
    return request.getfixturevalue("joined_ray") if engine == "ray" else None


def _all_ended(before: set[int], head: RayHead | None) -> None:
    """Every rank and worker the run started has ended: under a joined Ray, its actors
    too (the head's daemons and idle workers are the module's, not the run's)."""
    if head is None:
        assert descendants(os.getpid()) <= before
        return
    left = wait_gone(head.actors(), ACTORS_GONE_S)
    assert not left, f"actors of an ended run still live: {sorted(left)}"
    assert descendants(os.getpid()) - head.processes() <= before


@pytest.mark.parametrize("engine", ray_slow(ENGINES))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_conformance(engine: str, case: Case, tmp_path: Path,
                            request: pytest.FixtureRequest) -> None:
    head = _head(engine, request)
    before = descendants(os.getpid())
    check(engine, case, tmp_path, head)
    _all_ended(before, head)  # every rank and worker ended


@pytest.mark.slow
def test_a_private_ray_takes_more_replicas_than_cores(tmp_path: Path) -> None:
    """As the local engine starts a process per replica whatever the cores, a private
    Ray gets a CPU per replica (each actor asks for one); it had only the cores, and a
    run of more replicas waited its minute and failed."""
    if why := unavailable("ray"):
        pytest.skip(f"ray engine: {why}")
    replicas = (os.cpu_count() or 1) + 1
    case = Case("more replicas than cores", "answers",
                result={"processes": replicas, "values": [2 * i for i in range(12)]},
                replicas=replicas)
    check("ray", case, tmp_path)


# What the run's error adds of a replica that died, by engine (the local engine waits
# for the process; Ray says only what it saw of the actor's end, not a signal).
_DEATH_SAID = {"hosts": (), "local": ("worker server-0 was killed by signal 9 (SIGKILL)",),
               "ray": ("worker server-0 (a Ray actor) ended: ", "(Ray: SYSTEM_ERROR)")}


@pytest.mark.parametrize("engine", ray_slow(sorted(_DEATH_SAID)))
def test_a_replica_that_dies_is_named_with_how(engine: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    head = _head(engine, request)
    case = dataclasses.replace(DEATH, error=DEATH.error + _DEATH_SAID[engine])
    before = descendants(os.getpid())
    check(engine, case, tmp_path, head)
    _all_ended(before, head)


# A served module whose process ends while it imports (os._exit, a crash in an extension,
# the OOM killer): the run fails as a start that failed, naming the replica and how its
# worker ended as far as the engine knows (Ray knows no exit status, only its own words).
_EXITS_AT_IMPORT = dataclasses.replace(
    CASES[0], name="a module whose process ends at import", result=None,
    server_source=("import os\n\nos._exit(3)\n\n\ndef work(x):\n    return x\n\n\n"
                   "def scaled(b, i):\n    return i\n"),
    error=("polybus run: error: worker server-", " while starting"))
_EXIT_SAID = {"local": ("exited with status 3 while starting",),
              "ray": ("(a Ray actor) ended while starting: ", "(Ray: SYSTEM_ERROR)")}


@pytest.mark.parametrize("engine", ray_slow(sorted(_EXIT_SAID)))
def test_a_replica_whose_process_ends_at_import_is_a_failed_start(
        engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """(Under ray the run ended on a traceback of polybus's own code, `ray.exceptions.
    ActorDiedError` and Ray's paragraph of common causes, exit status 1, as if polybus had
    failed: only a module that raised was taken for a failed start.)"""
    head = _head(engine, request)
    case = dataclasses.replace(_EXITS_AT_IMPORT, error=_EXITS_AT_IMPORT.error + _EXIT_SAID[engine])
    before = descendants(os.getpid())
    check(engine, case, tmp_path, head)
    _all_ended(before, head)
