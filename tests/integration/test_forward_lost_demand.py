"""A producer run again after its replica died, under ``async-demand``, when its own
consumer (a call of the same binding) is held on the replica left for its value.

``q = step(step(x))`` with ``async-demand(1)`` on two replicas: p runs on one, q is
placed on the other (room in its window) and held there for p's value. p's replica
dies: p is to run again, and the one replica left has its window of one taken by q,
which waits for p.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from polybus.errors import RemoteException

from . import comm_harness
from .comm_harness import cluster
from .test_forward_backlog import X, kill, replica
from .test_forward_held import outcome

GATED = '''
def gated(x, flag):
    # doubles x once ``flag`` exists (the test's kill comes before it)
    _gate(flag, 20.0, every=0.001)
    return x * 2
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.gated = {{ pool = 2, idempotent = {idempotent} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated = {{ callstyle = "async-demand({window})" }}

[bind]
"client.gated" = "server.gated"
"""


@pytest.fixture(autouse=True)
def gated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + GATED)
    yield


def test_a_producer_lost_runs_again_beside_its_consumers_held_on_the_replica_left(
        tmp_path: Path) -> None:
    with cluster(tmp_path, TOML.format(idempotent="true", window=1), replicas=2) as c:
        s = c.session()
        flag = str(tmp_path / "go")
        p = s.call("gated", (X, flag), {})
        q = s.call("gated", (p, flag), {})
        assert s.dispatchers["gated"].backlogged == 0  # (placed: held for p's value)
        r = s.call("gated", (q, flag), {})  # (waits at the client: no room)
        assert s.dispatchers["gated"].backlogged == 1
        producer = replica(c, p)
        assert replica(c, q) is not producer
        kill(producer)
        (tmp_path / "go").touch()  # (p run again answers at once)
        assert np.allclose(outcome(r, within=15), X * 8)
        assert np.allclose(outcome(q, within=5), X * 4)


def test_a_producer_that_may_not_run_again_fails_its_held_consumer(tmp_path: Path) -> None:
    # (the same, p not idempotent: q fails naming p's replica, as it did before)
    with cluster(tmp_path, TOML.format(idempotent="false", window=1), replicas=2) as c:
        s = c.session()
        flag = str(tmp_path / "go")
        p = s.call("gated", (X, flag), {})
        q = s.call("gated", (p, flag), {})
        producer = replica(c, p)
        kill(producer)
        (tmp_path / "go").touch()
        with pytest.raises(RemoteException) as err:
            outcome(q, within=15)
        assert err.value.remote_type == "WorkerDiedError", err.value
