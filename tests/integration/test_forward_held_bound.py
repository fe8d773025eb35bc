"""A consumer stage called faster than its producer runs: its calls held on its replica
are bounded, and those past the bound fail at once with a BusyError.

A consumer call naming a forwarded value that has not come is held on its replica
(worker/fwdheld.py). With plain ``async`` every consumer call is sent at once, so a
producer held back left any number of them held there, counted by no bound. Now at
most ``held_max`` are held (worker/fwdbound.py); the rest are refused at once with a
``BusyError``, the held ones answered when the value comes, and the replica serves on.
The bound never stops the reading of a connection: under ``overflow = "block"``, with
the producer on the consumer's own replica, a queue of 2 and one handler, a producer
made while the bound is full still runs (counting the held calls against that queue
would have stopped reading the connection their producers and values come on). Under
``"reject"`` the bound refuses the same calls, however empty the queue.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.errors import BusyError
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
replication = {replicas}
define.gated_double = {{ queue = {queue}, overflow = "{overflow}" }}
define.slow_double = {{ queue = {queue}, overflow = "{overflow}" }}
define.double = {{ queue = {queue}, overflow = "{overflow}" }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = {{ callstyle = "async"{producer} }}
use.slow_double = {{ callstyle = "async"{producer} }}
use.double = {{ callstyle = "async"{consumer} }}

[bind]
"client.gated_double" = "server.gated_double"
"client.slow_double" = "server.slow_double"
"client.double" = "server.double"
"""

X = np.arange(16.0)
BOUND = 4
CONSUMERS = 10


def outcome(p: Any, within: float = 5.0) -> Any:
    """``wait(p)``, but a test that would wait for ever fails instead."""
    for _ in polybus.as_completed([p], timeout=within):
        pass
    return polybus.wait(p)


@pytest.mark.parametrize(("place", "overflow"), [
    ("same", "block"), ("same", "reject"), ("apart", "block")])
def test_consumers_held_past_the_bound_fail_at_once_and_the_rest_are_answered(
        tmp_path: Path, place: str, overflow: str) -> None:
    same = place == "same"
    # (a queue that the producer made while the bound is full fits in, so that its
    # consumer is read and refused, not held back; under "reject", one that the held
    # calls and it fit once their value comes: they are queued then, and a full queue
    # that rejects refuses them as it refuses any call)
    queue = 2 if overflow == "block" else BOUND + 1
    toml = TOML.format(replicas=1 if same else 2, overflow=overflow, queue=queue,
                       producer="" if same else ', loadratio = "1:0"',
                       consumer="" if same else ', loadratio = "0:1"')
    flag = tmp_path / "go"
    with cluster(tmp_path, toml, replicas=1 if same else 2) as c:
        rt: WorkerRuntime = c.runtimes[0 if same else 1]
        assert rt.options.pool == 1 and rt.options.queue == queue
        rt.forwarding.held_max = BOUND
        s = c.session()
        try:
            p = s.call("gated_double", (X, str(flag)), {})  # held back till the flag
            consumers = [s.call("double", (p,), {}) for _ in range(CONSUMERS)]
            for q in consumers[BOUND:]:  # (before the bound they waited with the rest)
                with pytest.raises(BusyError) as err:
                    outcome(q)
                assert f"{rt.name} did not take this call: {BOUND} calls wait there for " \
                       f"forwarded values (at most {BOUND}, or " in str(err.value)
            assert rt.forwarding.held_calls() == BOUND
            assert not any(q.done for q in consumers[:BOUND])
            # The bound full, a producer made now is still taken (it names no value
            # that has not come), and its consumer refused.
            p3 = s.call("slow_double", (X, 0), {})
            with pytest.raises(BusyError):
                outcome(s.call("double", (p3,), {}))
        finally:
            flag.touch()
        for q in consumers[:BOUND]:
            assert np.array_equal(outcome(q), X * 4)
        assert np.array_equal(outcome(p), X * 2)
        assert np.array_equal(outcome(p3), X * 2)
        assert rt.forwarding.held_calls() == 0 and rt.forwarding._holding == 0
        # The replica serves on: producers and consumers as before, as many as the bound
        # held there (the producer held back till they are: not answered before them,
        # which would send its value through the client and hold none).
        for i in range(2):
            again_flag = tmp_path / f"again{i}"
            p2 = s.call("gated_double", (X, str(again_flag)), {})
            try:
                again = [s.call("double", (p2,), {}) for _ in range(BOUND)]
                deadline = time.monotonic() + 10
                while rt.forwarding.held_calls() < BOUND:
                    assert time.monotonic() < deadline, rt.forwarding.held_calls()
                    s.reactor.flush_all()
                    time.sleep(0.001)
            finally:
                again_flag.touch()
            assert all(np.array_equal(outcome(q), X * 4) for q in again)
        assert rt.forwarding.held_refused == CONSUMERS - BOUND + 1
