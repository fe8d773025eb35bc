"""Every engine passes the same checks (polybus/testing/engines.py): the same programs
give the same answers and the same errors, started locally, under mpiexec or as Ray
actors."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from polybus.testing.engines import CASES, DEATH, ENGINES, Case, check, unavailable

from .conftest import descendants


def ray_slow(engines: Sequence[str]) -> list[Any]:
    """The engines, Ray's marked slow: each of its runs starts a Ray of its own."""
    return [pytest.param(e, marks=pytest.mark.slow) if e == "ray" else e for e in engines]


@pytest.mark.parametrize("engine", ray_slow(ENGINES))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_conformance(engine: str, case: Case, tmp_path: Path) -> None:
    if why := unavailable(engine):
        pytest.skip(f"{engine} engine: {why}")
    before = descendants(os.getpid())
    check(engine, case, tmp_path)
    assert descendants(os.getpid()) <= before  # every rank and worker ended


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
def test_a_replica_that_dies_is_named_with_how(engine: str, tmp_path: Path) -> None:
    if why := unavailable(engine):
        pytest.skip(f"{engine} engine: {why}")
    case = dataclasses.replace(DEATH, error=DEATH.error + _DEATH_SAID[engine])
    before = descendants(os.getpid())
    check(engine, case, tmp_path)
    assert descendants(os.getpid()) <= before
