"""A request the route's interface cannot compute its ``priority`` for (the expression
reads a query field the request lacks) is the request's fault: 400 Bad Request with
why, not 502 Bad Gateway, which blames the replicas behind the front door."""

from __future__ import annotations

import http.client
import signal
import textwrap
from pathlib import Path

from integration.conftest import Procs, read_line, rest_of

WEB = '''\
def who(query):
    return "hello " + query["n"]
'''

TOML = '''\
[modules.web]
source = "web.py"
replication = 1
define.who = { priority = "len(query['n'])" }

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /who" = "web.who"
'''


def test_a_priority_the_request_cannot_give_is_a_400(procs: Procs, tmp_path: Path) -> None:
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB))
    (tmp_path / "app.toml").write_text(TOML)
    p = procs.start("serve", tmp_path / "app.toml")
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    conn = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=30)
    try:
        conn.request("GET", "/who")  # no ?n: len(query['n']) raises KeyError
        r = conn.getresponse()
        status, body = r.status, r.read().decode()
    finally:
        conn.close()
    assert status == 400, body
    assert body == ("400 Bad Request: web.who: interface 'who': priority "
                    "\"len(query['n'])\" (modules.web.define.who.priority) cannot be "
                    "computed for this call: KeyError: 'n'\n"), body
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=60) == 130
    err = rest_of(p.stderr)
    assert "GET /who -> web.who: 400 " in err, err  # (said to the operator too)
    # One request, said as one ("stopping after 1 requests" it was).
    assert "polybus serve: stopping after 1 request\n" in err, err
