"""Stopping `polybus serve` with requests in flight (SIGINT, SIGTERM): the listener
closes, the requests in flight finish within `serve.grace` (or are answered 503 past
it), no traceback is printed, and serve exits 130 or 143 as `run` does.

Behaviour only: each handler says it has begun by a file of its own, so the signal is
sent once every request is in flight, however slow the machine.
"""

from __future__ import annotations

import http.client
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from integration.conftest import Procs, descendants, read_line, rest_of, wait_gone

WEB = '''\
import os
import time
import uuid


def hello():
    return "hello"


def slow(query):
    open(os.path.join({began!r}, uuid.uuid4().hex), "w").close()  # (begun: the test sees it)
    if "gate" in query:  # (until the test opens it: a file "open" beside began/)
        while not os.path.exists(os.path.join({began!r}, os.pardir, "open")):
            time.sleep(0.01)
        return (201, {{}}, "done")
    time.sleep(float(query.get("s", "2")))
    return (201, {{}}, "done")
'''

TOML = '''\
[modules.web]
source = "web.py"
define.hello = {{}}
define.slow = {{ pool = 4 }}

[serve]
listen = "127.0.0.1:0"
{grace}

[serve.routes]
"GET /" = "web.hello"
"GET /slow" = "web.slow"
{routes}
'''


def _serve(procs: Procs, where: Path, grace: str = "", routes: str = "",
           args: tuple[str, ...] = ()) -> tuple[int, Path]:
    """serve's port and the folder each /slow call marks its start in; ``grace``: lines
    of [serve] (any key), ``routes``: routes more, ``args``: serve's own (``--set``)."""
    began = where / "began"
    began.mkdir(parents=True)
    (where / "web.py").write_text(textwrap.dedent(WEB).format(began=str(began)))
    (where / "app.toml").write_text(TOML.format(grace=grace, routes=routes))
    p = procs.start("serve", where / "app.toml", *args)
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    assert m.group(1) == "127.0.0.1"
    return int(m.group(2)), began


def _requests(port: int, n: int, url: str) -> tuple[list[threading.Thread], list[object]]:
    """``n`` requests at once, each on a connection of its own; what each got, as it
    comes (a status and the Retry-After header, or the exception)."""
    got: list[object] = []

    def one() -> None:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            c.request("GET", url)
            r = c.getresponse()
            r.read()
            got.append((r.status, r.getheader("Retry-After"), r.getheader("Connection")))
        except Exception as exc:  # (what the old front door gave: RemoteDisconnected)
            got.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    return threads, got


def _all_began(began: Path, n: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(list(began.iterdir())) < n:
        assert time.monotonic() < deadline, f"{len(list(began.iterdir()))} of {n} began"
        time.sleep(0.02)


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_requests_in_flight_finish_and_serve_exits_with_its_signal(
        procs: Procs, tmp_path: Path, sig: signal.Signals, status: int) -> None:
    """Each client got RemoteDisconnected, stderr one asyncio traceback per connection
    (CancelledError), and serve exited 0."""
    port, began = _serve(procs, tmp_path)
    proc = procs.started[-1]
    workers = descendants(proc.pid)
    procs.watch(workers)
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # (kept open, idle)
    idle.request("GET", "/")
    assert idle.getresponse().read() == b"hello"
    threads, got = _requests(port, 3, "/slow?s=2")
    _all_began(began, 3)
    proc.send_signal(sig)
    for t in threads:
        t.join(60)
    assert got == [(201, None, "close")] * 3, got  # (answered, then closed)
    assert proc.wait(timeout=30) == status
    assert not wait_gone(workers)
    assert proc.stderr is not None
    said = rest_of(proc.stderr)
    assert "Traceback" not in said and "CancelledError" not in said, said
    assert "3 in flight get 5 s to finish" in said, said
    assert ("interrupted" if sig == signal.SIGINT else "terminated") in said, said
    idle.close()


def test_a_request_past_the_grace_is_answered_503(procs: Procs, tmp_path: Path) -> None:
    port, began = _serve(procs, tmp_path, grace='grace = "0.2s"')
    proc = procs.started[-1]
    workers = descendants(proc.pid)
    procs.watch(workers)
    threads, got = _requests(port, 2, "/slow?s=60")
    _all_began(began, 2)
    proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(60)
    assert got == [(503, "1", "close")] * 2, got
    assert proc.wait(timeout=30) == 143
    assert not wait_gone(workers)
    assert proc.stderr is not None
    said = rest_of(proc.stderr)
    assert "Traceback" not in said and "never looked at" not in said, said


def test_a_second_signal_ends_the_grace_at_once(procs: Procs, tmp_path: Path) -> None:
    port, began = _serve(procs, tmp_path)  # (the grace: 5 s, the call: 60 s)
    proc = procs.started[-1]
    workers = descendants(proc.pid)
    procs.watch(workers)
    threads, got = _requests(port, 1, "/slow?s=60")
    _all_began(began, 1)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    read_line(proc.stderr, r"1 in flight get 5 s to finish")
    proc.send_signal(signal.SIGINT)
    for t in threads:
        t.join(60)
    assert got == [(503, "1", "close")], got
    assert proc.wait(timeout=30) == 130
    assert not wait_gone(workers)


def test_a_connection_waiting_for_a_slot_is_answered_503_at_a_stop(
        procs: Procs, tmp_path: Path) -> None:
    """It was closed without a word (RemoteDisconnected), its request never answered."""
    port, began = _serve(procs, tmp_path, grace='grace = "0.2s"\nmax_connections = 1')
    proc = procs.started[-1]
    workers = descendants(proc.pid)
    procs.watch(workers)
    running, got_running = _requests(port, 1, "/slow?s=60")
    _all_began(began, 1)
    waiting, got_waiting = _requests(port, 1, "/")
    assert proc.stderr is not None
    read_line(proc.stderr, r"all 1 connection slots .* are taken")  # (it waits for one)
    proc.send_signal(signal.SIGTERM)
    for t in running + waiting:
        t.join(60)
    assert got_waiting == [(503, "1", "close")], got_waiting
    assert got_running == [(503, "1", "close")], got_running  # (past its grace)
    assert proc.wait(timeout=30) == 143
    assert not wait_gone(workers)
    said = rest_of(proc.stderr)
    assert "Traceback" not in said, said
