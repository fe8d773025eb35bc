"""`polybus serve` starts again a local worker that ended on its own, and the front
door serves through the new process (engines/supervise.py, http/revival.py).

Behaviour only: each test asks until the front door answers again, within a bound."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from integration.conftest import Procs, descendants, read_line
from integration.test_serve_revival import _app, _get, _listening, _pids_until


def test_a_worker_that_exits_is_started_again_and_serves(procs: Procs, tmp_path: Path) -> None:
    host, port, pid = _listening(procs, _app(tmp_path, 1))
    (first,) = _pids_until(host, port, 1)
    procs.watch({first})
    assert _get(host, port, "/bye")[0] == 502  # the handler ends its process (status 3)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"polybus serve: worker web-0 exited with status 3; "
                   r"starting it again in 0\.5 s", timeout=30)
    read_line(err, r"polybus serve: worker web-0 started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    (second,) = _pids_until(host, port, 1)  # asked until it answers
    assert second != first and second in descendants(pid)


def test_a_killed_worker_of_two_is_started_again(procs: Procs, tmp_path: Path) -> None:
    host, port, pid = _listening(procs, _app(tmp_path, 2))
    workers = descendants(pid)
    procs.watch(workers)
    before = _pids_until(host, port, 2)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"polybus serve: worker web-\d was killed by signal 9 \(SIGKILL\)",
              timeout=30)
    read_line(err, r"started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    after = _pids_until(host, port, 2, timeout=60)
    assert victim not in after and len(after & before) == 1


def test_a_route_with_work_stealing_gets_its_restarted_replica_back(
        procs: Procs, tmp_path: Path) -> None:
    """Its links were never refilled: a migrator's replicas stayed lost for good."""
    app = _app(tmp_path, 2)
    app.write_text(app.read_text().replace('"GET /pid" = "web.pid"',
                                           '"GET /pid" = { to = "web.pid", balance = "steal" }'))
    host, port, pid = _listening(procs, app)
    procs.watch(descendants(pid))
    before = _pids_until(host, port, 2)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    after = _pids_until(host, port, 2, timeout=60)
    assert victim not in after and len(after & before) == 1
