"""`polybus serve`: a client that hangs up while its request runs, and what a 504 says.

A client that closed its connection mid-request kept its connection slot (and its call)
until the call ended: with a handler that never returns and no route timeout,
`max_connections` such clients shut every other client out. The front door now notices
the close while the request runs, frees the slot and gives the call up as a timeout
does. Bytes the client pipelined behind the request are not a close.

A 504 said only that no answer came: not whether the call had been sent to a replica
(and to which) or was still held at the front door. It says which now.

Each /slow handler marks its start by a file (test_serve_stop.py's app), so that what
a test does next waits for a condition, not for a fixed time.
"""

from __future__ import annotations

import http.client
import signal
import socket
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from integration.conftest import Procs, descendants, read_line, rest_of, wait_gone
from integration.test_serve_stop import _all_began, _serve

_SLOW = b"GET /slow?s=600 HTTP/1.1\r\nHost: h\r\n\r\n"


def _hang_up(s: socket.socket, how: str) -> None:
    if how == "reset":  # (RST: SO_LINGER on, 0 s)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_that_hangs_up_mid_request_frees_its_slot(
        procs: Procs, tmp_path: Path, how: str) -> None:
    port, began = _serve(procs, tmp_path, grace="max_connections = 2")
    proc = procs.started[-1]
    workers = descendants(proc.pid)
    procs.watch(workers)
    clients = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(2)]
    for c in clients:
        c.sendall(_SLOW)  # (a handler that runs 10 minutes, on a route with no timeout)
    _all_began(began, 2)
    for c in clients:
        _hang_up(c, how)
    # Both slots were held for the 10 minutes: this one waited for one (its timeout).
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", "/")
        r = c.getresponse()
        assert (r.status, r.read()) == (200, b"hello")
    finally:
        c.close()
    assert proc.stderr is not None
    for _ in clients:
        read_line(proc.stderr, r"GET /slow\?s=600 -> web\.slow: abandoned by its client")
    proc.send_signal(signal.SIGTERM)  # (nothing in flight: the calls were given up)
    assert proc.wait(timeout=30) == 143
    assert not wait_gone(workers)


def _get(port: int, url: str) -> tuple[int, str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def test_bytes_pipelined_behind_a_running_request_are_not_a_hangup(
        procs: Procs, tmp_path: Path) -> None:
    port, began = _serve(procs, tmp_path)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"GET /slow?s=0.5 HTTP/1.1\r\nHost: h\r\n\r\n")
        _all_began(began, 1)
        s.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")  # (early)
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
    assert got.startswith(b"HTTP/1.1 201 "), got
    assert got.count(b"HTTP/1.1 ") == 2 and got.endswith(b"\r\n\r\nhello"), got
    proc = procs.started[-1]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert proc.stderr is not None
    err = rest_of(proc.stderr)
    assert "terminated" in err and "abandoned" not in err, err


def test_a_504_says_whether_its_call_was_sent_or_held_at_the_front_door(
        procs: Procs, tmp_path: Path) -> None:
    held = '"GET /held" = { to = "web.slow", callstyle = "async-demand(1)", timeout = "5s" }'
    port, began = _serve(procs, tmp_path, routes=held,
                         args=("--set", "modules.web.define.slow.pool=1"))
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_get, port, "/held?s=600")
        _all_began(began, 1)  # (running at web-0: async-demand(1) holds the next back)
        second = pool.submit(_get, port, "/held?s=600")
        (status1, sent), (status2, held_back) = first.result(60), second.result(60)
    assert (status1, status2) == (504, 504), (sent, held_back)
    assert "sent to replica web-0" in sent, sent
    assert "whether it had begun there is not known" in sent, sent  # (no word for it)
    assert "held at the front door" in held_back and "never sent" in held_back, held_back
    proc = procs.started[-1]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert proc.stderr is not None
    err = rest_of(proc.stderr)
    said = [line for line in err.splitlines() if "GET /held?s=600 -> web.slow: 504" in line]
    assert len(said) == 2 and any("sent to replica web-0" in x for x in said), err
    assert any("never sent" in x for x in said), err


def test_a_504_whose_call_its_replica_dropped_unrun_is_said_so(
        procs: Procs, tmp_path: Path) -> None:
    """A call queued behind a running one past its route's timeout: the 504 cannot say
    whether it had begun, and the line serve says once its replica has dropped it
    (its ``Released``) does: it never runs."""
    soon = '"GET /soon" = { to = "web.slow", timeout = "1s" }'
    port, began = _serve(procs, tmp_path, routes=soon,
                         args=("--set", "modules.web.define.slow.pool=1"))
    proc = procs.started[-1]
    assert proc.stderr is not None
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_get, port, "/slow?gate=1")
        _all_began(began, 1)  # (the replica's one thread for it is taken)
        status, body = _get(port, "/soon?s=0")
        assert status == 504 and "sent to replica web-0" in body, body
        # (its send was not timed on this route: no time is made up for it; it said
        # "sent to replica web-0 6.29e+04 s before", the clock's own count)
        assert "1 other call of the front door's still unanswered there" in body, body
        assert " before," not in body, body
        read_line(proc.stderr, r"GET /soon\?s=0 -> web\.slow: the call given up was "
                               r"dropped at web-0 before it began: it never runs")
        (tmp_path / "open").touch()
        assert first.result(60) == (201, "done")
    assert _get(port, "/slow?s=0.01") == (201, "done")
    assert len(list(began.iterdir())) == 2, sorted(began.iterdir())  # (it never ran)


def test_a_request_queued_at_its_replica_whose_client_hangs_up_never_runs(
        procs: Procs, tmp_path: Path) -> None:
    """Revoked as a timed-out call is (or, its close heard before it began, never sent):
    the request behind it on the replica's one thread runs next. The gate opens once
    serve says the replica dropped it (its ``Released``): the guarantee is for a call
    not begun when its replica reads the Revoke ("abandoned" is said as the front door
    gives the call up, before that; the gate opened then, the call began, under load,
    before the replica read it)."""
    port, began = _serve(procs, tmp_path, args=("--set", "modules.web.define.slow.pool=1"))
    proc = procs.started[-1]
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_get, port, "/slow?gate=1")
        _all_began(began, 1)  # (the replica's one thread for it is taken)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /slow?s=0 HTTP/1.1\r\nHost: h\r\n\r\n")
        assert proc.stderr is not None
        said = read_line(proc.stderr, r"GET /slow\?s=0 -> web\.slow: abandoned by its client"
                                      r" (.*)")
        if "no call made" not in said.group(1):  # (sent: dropped once web-0 reads the Revoke)
            read_line(proc.stderr, r"GET /slow\?s=0 -> web\.slow: the call given up was "
                                   r"dropped at web-0 before it began: it never runs")
        (tmp_path / "open").touch()
        assert first.result(60) == (201, "done")
    assert _get(port, "/slow?s=0.01") == (201, "done")  # (queued behind where it was)
    assert len(list(began.iterdir())) == 2, sorted(began.iterdir())  # (it never ran)


def test_a_client_that_gave_up_waiting_for_a_slot_is_not_called(
        procs: Procs, tmp_path: Path) -> None:
    """Its request and its close were read together; it took the slot and its call
    ran for nobody (for good, with a handler that never returns)."""
    port, began = _serve(procs, tmp_path, grace="max_connections = 1")
    proc = procs.started[-1]
    assert proc.stderr is not None
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_get, port, "/slow?gate=1")
        _all_began(began, 1)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /slow?s=0 HTTP/1.1\r\nHost: h\r\n\r\n")
            read_line(proc.stderr, r"all 1 connection slots .* are taken")  # (it waits)
        (tmp_path / "open").touch()
        assert first.result(60) == (201, "done")
    read_line(proc.stderr, r"GET /slow\?s=0 -> web\.slow: abandoned by its client \(it "
                           r"closed the connection before the request began\); no call")
    assert _get(port, "/slow?s=0.01") == (201, "done")
    assert len(list(began.iterdir())) == 2, sorted(began.iterdir())  # (it never ran)
