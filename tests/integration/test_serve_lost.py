"""`polybus serve` with ``restart = false`` says how a lost replica's worker ended, as
`polybus run` does: in the warning of its loss, and in the 502 of the requests that
find it gone, which say it is not started again (no "retry later" for a replica nothing
will bring back).

Behaviour only: the warning is waited for (bounded), never timed."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from integration.conftest import Procs, read_line, rest_of
from integration.test_serve_revival import _app, _get, _get_with_headers, _listening, _pids_until

NOT_AGAIN = b"not started again ([serve] restart = false)"


def _no_restart(where: Path) -> Path:
    app = _app(where, 1)
    app.write_text(app.read_text().replace('listen = "127.0.0.1:0"',
                                           'listen = "127.0.0.1:0"\nrestart = false'))
    return app


def test_a_killed_replica_is_said_lost_with_the_signal_that_ended_it(
        procs: Procs, tmp_path: Path) -> None:
    """The warning said only "closed the connection" (the front door's session was not
    told how the engine's workers ended), and the next request's 502 said "retry later"
    of a worker that nothing would start again, as serve's log said its place was
    empty for "none registered in their place yet"."""
    host, port, _ = _listening(procs, _no_restart(tmp_path))
    (worker,) = _pids_until(host, port, 1)
    procs.watch({worker})
    os.kill(worker, signal.SIGKILL)  # (the worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker was killed by signal 9 (SIGKILL)"), m.group(0)
    status, body, headers = _get_with_headers(host, port, "/pid")
    assert status == 502, body
    assert body.startswith(b"502 Bad Gateway: web.pid: no live replica serves pid@http; "
                           b"worker web-0 was killed by signal 9 (SIGKILL); "), body
    assert NOT_AGAIN in body and b"retry later" not in body, body
    assert "Retry-After" not in headers, headers  # (nothing will bring it back)
    serve = procs.started[-1]
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=60) == 143
    rest = rest_of(err)  # (the look this request waited for was said before its 502)
    assert ("polybus serve: module 'web': lost replica(s) web-0 not back yet (their "
            "workers ended, and are not started again: [serve] restart = false)") in rest, rest
    assert ("polybus serve: GET /pid -> web.pid: 502 no live replica serves pid@http; "
            "worker web-0 was killed by signal 9 (SIGKILL); ") in rest, rest


def test_a_request_whose_worker_exits_gets_a_502_saying_how_it_ended(
        procs: Procs, tmp_path: Path) -> None:
    """A request in flight on the replica that ends (its handler calls os._exit(3))."""
    host, port, _ = _listening(procs, _no_restart(tmp_path))
    (worker,) = _pids_until(host, port, 1)
    procs.watch({worker})
    status, body = _get(host, port, "/bye")
    assert status == 502, body
    assert re.match(rb"502 Bad Gateway: web\.bye: the call bye@http\(\) was lost: .*; "
                    rb"worker web-0 exited with status 3; ", body), body
    assert NOT_AGAIN in body and b"retry later" not in body, body
    err = procs.started[-1].stderr
    assert err is not None
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker exited with status 3"), m.group(0)
