"""`polybus serve` with ``restart = false`` says how a lost replica's worker ended, as
`polybus run` does, in the warning of its loss.

Behaviour only: the warning is waited for (bounded), never timed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from integration.conftest import Procs, read_line
from integration.test_serve_revival import _app, _get, _listening, _pids_until


def _no_restart(where: Path) -> Path:
    app = _app(where, 1)
    app.write_text(app.read_text().replace('listen = "127.0.0.1:0"',
                                           'listen = "127.0.0.1:0"\nrestart = false'))
    return app


def test_a_killed_replica_is_said_lost_with_the_signal_that_ended_it(
        procs: Procs, tmp_path: Path) -> None:
    """The warning said only "closed the connection": the front door's session was not
    told how the engine's workers ended."""
    host, port, _ = _listening(procs, _no_restart(tmp_path))
    (worker,) = _pids_until(host, port, 1)
    procs.watch({worker})
    os.kill(worker, signal.SIGKILL)  # (the worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker was killed by signal 9 (SIGKILL)"), m.group(0)


def test_a_request_whose_worker_exits_is_said_lost_with_its_exit_status(
        procs: Procs, tmp_path: Path) -> None:
    """A request in flight on the replica that ends (its handler calls os._exit(3))."""
    host, port, _ = _listening(procs, _no_restart(tmp_path))
    (worker,) = _pids_until(host, port, 1)
    procs.watch({worker})
    status, body = _get(host, port, "/bye")
    assert status == 502, body
    err = procs.started[-1].stderr
    assert err is not None
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker exited with status 3"), m.group(0)
