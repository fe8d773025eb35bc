"""A call lost with each replica that went, when each was killed by SIGKILL: the error
says that a SIGKILL comes from outside the call, not first that the call may be what
ends them (serve's 502 said so of two replicas killed by hand, beside "killed by signal
9"); so when each was stopped (a stop signal, or an engine's worker's clean end of one:
serve's whole process group stopped, as systemd does, said it of its workers that
exited 0: servemix). Lost with replicas that ended otherwise, it says so as before
(client/calls.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client.session import Session
from polybus.errors import ConnectionLostError

from .comm_harness import Cluster, cluster
from .test_forward_backlog import kill

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.nap = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.nap = { callstyle = "async" }

[bind]
"client.nap" = "server.nap"
"""

SIGKILL = "was killed by signal 9 (SIGKILL)"
STOPPED = "exited with status 0"  # (an engine's worker, stopped by SIGTERM: a clean end)


def polled(s: Session, check: Callable[[], bool], within: float = 10.0) -> bool:
    """Take in what came (as a program's next wait would) until ``check()`` holds."""
    deadline = time.monotonic() + within
    while not check() and time.monotonic() < deadline:
        s.reactor.poll()
        time.sleep(0.01)
    return check()


def kill_where_it_runs(c: Cluster, s: Session, rec: Any) -> None:
    assert polled(s, lambda: rec.link is not None and not rec.link.dead), rec
    lost = rec.link
    kill(next(rt for rt in c.runtimes if rt.name == lost.name))
    assert polled(s, lambda: rec.done or rec.link is not lost)


@pytest.mark.parametrize("how", [SIGKILL, STOPPED, "was killed by signal 15 (SIGTERM)",
                                 "exited with status 3"])
def test_a_call_lost_with_every_replica_killed(tmp_path: Path, how: str) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        s.losses.how_ended = lambda name: how  # (as the engine that started them tells)
        p = s.call("nap", (1, str(tmp_path / "never")), {})  # (killed before it ends)
        rec = p._rec  # type: ignore[attr-defined]
        kill_where_it_runs(c, s, rec)  # the replica it runs on: it runs again on the other
        kill_where_it_runs(c, s, rec)
        with pytest.raises(ConnectionLostError) as info:
            polybus.wait(p)
        said = str(info.value)
        assert "this call was running on each of the 2 replicas" in said, said
        if how == SIGKILL:
            assert "may be what ends them" not in said, said
            assert ("each was killed by SIGKILL, which comes from outside the call (a user, "
                    "a supervisor, or the kernel's OOM killer, which the call's own memory "
                    "use can set off)") in said, said
        elif how != "exited with status 3":  # (stopped: serve's group stopped by systemd)
            assert "may be what ends them" not in said, said
            assert ("but each was stopped (a stop signal, SIGTERM or Ctrl-C, as a supervisor "
                    "stopping the service sends it to the whole process group) or killed by "
                    "SIGKILL, from outside the call") in said, said
        else:
            assert "so it may be what ends them" in said, said
