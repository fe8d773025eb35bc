"""`polybus serve` with a replica whose queue is full under `overflow = "block"` and
whose handler never returns: the replica stops reading its calls, and the front door
must go on serving while it waits for room (real requests on 127.0.0.1).

Behaviour only: every request to the stuck route gets its route's 504, another module's
route answers meanwhile, and SIGTERM stops serve and its workers.
"""

from __future__ import annotations

import http.client
import signal
import textwrap
import threading
from pathlib import Path

from integration.conftest import Procs, descendants, read_line, wait_gone

WEB = '''\
import os
import threading

_never = threading.Event()


def hello():
    return "hello"


def stuck(body):
    open(os.path.join({began!r}, str(len(os.listdir({began!r})))), "w").close()
    _never.wait(600)  # (never returns while the test runs: the worker is killed)
    return "late"
'''

TOML = '''\
[modules.web]
source = "web.py"
define.stuck = { pool = 1, queue = 1, overflow = "block" }

[modules.other]
source = "web.py"
define.hello = {}

[serve]
listen = "127.0.0.1:0"
max_body = "2MiB"

[serve.routes]
"POST /stuck" = { to = "web.stuck", timeout = "1s" }
"GET /" = "other.hello"
'''

# Enough bytes of requests to fill the sockets between the front door and a replica that
# reads none of them (its kernel buffers grow to a few MiB on loopback).
_N, _BODY = 48, b"x" * (1 << 20)


def test_a_replica_that_stops_reading_does_not_stop_the_front_door(
        procs: Procs, tmp_path: Path) -> None:
    """The front door's event loop waited inside a send for room the replica never
    made: no 504 came, other routes went unanswered, and SIGTERM was not heard."""
    began = tmp_path / "began"
    began.mkdir()
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB).format(began=str(began)))
    (tmp_path / "app.toml").write_text(TOML)
    proc = procs.start("serve", tmp_path / "app.toml")
    assert proc.stderr is not None
    port = int(read_line(proc.stderr, r"listening on http://127\.0\.0\.1:([0-9]+)",
                         timeout=60).group(1))
    workers = descendants(proc.pid)
    procs.watch(workers)
    got: list[object] = []

    def one() -> None:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            c.request("POST", "/stuck", body=_BODY)
            r = c.getresponse()
            r.read()
            got.append(r.status)
        except Exception as exc:  # (the old front door: a client timeout)
            got.append(repr(exc))
        finally:
            c.close()

    threads = [threading.Thread(target=one) for _ in range(_N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == [504] * _N, got
    assert len(list(began.iterdir())) == 1  # (the one call that ran holds the replica)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    c.request("GET", "/")
    r = c.getresponse()
    assert (r.status, r.read()) == (200, b"hello")
    c.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert not wait_gone(workers)
