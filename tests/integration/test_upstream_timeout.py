"""A producer's ``timeout`` holds while the program waits for its consumer only.

A pipeline program often waits for the last stage alone: ``wait(g(f(x)))``. The
producer ``f`` has a timeout; ``g`` has none. When ``f`` hangs, it is given up at its
deadline all the same, and ``g`` fails with the upstream CallTimeoutError, whether
``f``'s value was to be forwarded to ``g``'s replica or sent on through the client
(``forward = false``), and through a stage between them with no timeout of its own.
Before, only a wait for ``f`` itself (or the run's end) looked at its deadline: the wait
for ``g`` waited as long as ``f`` ran, for ever for a hung call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.errors import CallTimeoutError, RemoteException

from .comm_harness import Cluster, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.double = {{}}
define.until = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = {{ callstyle = "async"{forward} }}
use.until = {{ callstyle = "{style}", timeout = 0.3 }}

[bind]
"client.double" = "server.double"
"client.until" = "server.until"
"""

X = np.arange(8.0)
GUARD_S = 8.0  # the hung producer is let go this long after the test starts, come what may


@pytest.fixture
def flag(tmp_path: Path) -> Iterator[Path]:
    """The file that ends the hung producer (``until``): made by a guard timer, so a test
    that would wait for ever gets the producer's value instead (and fails), and made at
    the end so that no call is left running."""
    f = tmp_path / "go"
    timer = threading.Timer(GUARD_S, f.touch)
    timer.start()
    try:
        yield f
    finally:
        timer.cancel()
        f.touch()


def run(tmp_path: Path, forward: bool, style: str = "async") -> Cluster:
    toml = TOML.format(forward="" if forward else ", forward = false", style=style)
    return cluster(tmp_path, toml, replicas=2)  # type: ignore[return-value]


def failed_upstream(err: RemoteException) -> None:
    assert err.remote_type == "CallTimeoutError", err
    line = str(err).splitlines()[0]
    assert "upstream" in line, err
    # Its replica named once, where it was sent (it did not fail there: the client gave
    # it up): "no answer from until within 0.3 s (sent to server-0) (failed in until,
    # upstream of ...)", not "... (failed in until on server-0, upstream of ...)".
    assert "(sent to server-" in line and "until on server-" not in line, line


@pytest.mark.parametrize("style", ["async", "async-demand(2)"])
@pytest.mark.parametrize("forward", [True, False], ids=["forwarded", "through-client"])
def test_waiting_for_the_consumer_gives_the_hung_producer_up(
        tmp_path: Path, flag: Path, forward: bool, style: str) -> None:
    with run(tmp_path, forward, style) as c:
        s = c.session()
        p1 = s.call("until", (X, str(flag)), {})
        p2 = s.call("double", (p1,), {})
        with pytest.raises(RemoteException) as err:
            polybus.wait(p2)
        failed_upstream(err.value)
        with pytest.raises(CallTimeoutError):
            polybus.wait(p1)


@pytest.mark.parametrize("forward", [True, False], ids=["forwarded", "through-client"])
def test_a_stage_between_with_no_timeout_is_failed_too(
        tmp_path: Path, flag: Path, forward: bool) -> None:
    with run(tmp_path, forward) as c:
        s = c.session()
        p3 = s.call("double", (s.call("double", (s.call("until", (X, str(flag)), {}),), {}),), {})
        with pytest.raises(RemoteException) as err:
            polybus.wait(p3)
        failed_upstream(err.value)


def test_as_completed_over_the_consumers_gives_the_producer_up(
        tmp_path: Path, flag: Path) -> None:
    with run(tmp_path, True) as c:
        s = c.session()
        ok = s.call("double", (s.call("double", (X,), {}),), {})
        hung = s.call("double", (s.call("until", (X, str(flag)), {}),), {})
        polybus.wait(ok)  # (answered first however slow the machine: not raced with 0.3 s)
        done = list(polybus.as_completed([ok, hung]))
        assert done[0] is ok and np.array_equal(polybus.wait(ok), X * 4)
        with pytest.raises(RemoteException) as err:
            polybus.wait(hung)
        failed_upstream(err.value)
