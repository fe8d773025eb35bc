"""Whether a worker started by hand orders calls by priority is said where a run's calls
with priorities reach it by an shm ring, whatever transport its module gives
(client/handsettings.py, config/workerside.py; the comparison itself: test_workerside.py).

One registry and one worker of the configuration as written: ``transport = "shm"``,
``f`` of a pool of one and no priority, so the calls waiting in its ring run as they
come (worker/direct.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.test_by_hand_settings import _warned
from polybus.testing.apps import write_one_call_app
from polybus.testing.hosts import by_hand

PRIORITY = 'modules.server.define.f.priority="x"'


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    app = write_one_call_app(tmp_path_factory.mktemp("priority"),
                             server_keys='replication = 1\ntransport = "shm"')
    said: list[str] = []
    with by_hand(app, 1, said) as use:
        yield app, use


def test_a_binding_of_its_own_shm_is_told_of_a_worker_that_runs_its_ring_as_it_comes(
        hand: tuple[Path, list[str]]) -> None:
    """The module's transport alone was looked at: a run whose module says TCP and whose
    binding says shm had its calls' priorities run as they came, unsaid."""
    found = _warned(hand, 'modules.server.transport="tcp"', PRIORITY,
                    'modules.client.use.f.transport="shm"')
    [said] = [w for w in found if "their own priority" in w]
    assert "server-0 has as they come where this run's configuration gives ordered" \
        in said, said


def test_a_run_over_tcp_is_not_told_of_the_order(hand: tuple[Path, list[str]]) -> None:
    found = _warned(hand, 'modules.server.transport="tcp"', PRIORITY)
    assert not [w for w in found if "their own priority" in w], found
