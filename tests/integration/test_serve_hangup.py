"""`polybus serve`: what a 504 says.

A 504 said only that no answer came: not whether the call had been sent to a replica
(and to which) or was still held at the front door. It says which now.

Each /slow handler marks its start by a file (test_serve_stop.py's app), so that what
a test does next waits for a condition, not for a fixed time.
"""

from __future__ import annotations

import http.client
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from integration.conftest import Procs, rest_of
from integration.test_serve_stop import _all_began, _serve


def _get(port: int, url: str) -> tuple[int, str]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


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
