"""Rudy (Sigurdsson, KTH course report, 2016): a web server whose requests each take
40 ms of work.

Plain functions; the front door (`polybus serve app.toml`) calls them with the request
fields they name (method, path, query, headers, body, subpath) and turns what they
return into the response: str -> text (or HTML), dict/list -> JSON, bytes, or
(status, headers, body).
"""

import time

PAGE = """<!doctype html>
<html><head><title>rudy</title></head>
<body><h1>rudy</h1><p>Served by a pool of handlers; try <a href="/work?ms=40">/work</a>.</p>
</body></html>
"""


def page() -> str:
    return PAGE


def work(query: dict[str, str]) -> dict[str, object]:
    """Sleep ``ms`` milliseconds (40 by default): the paper's artificial delay."""
    ms = float(query.get("ms", "40"))
    time.sleep(ms / 1000)
    return {"slept_ms": ms}


def echo(method: str, subpath: str, headers: dict[str, str], body: bytes) -> object:
    if method == "POST" and not body:
        return 400, {"Content-Type": "text/plain"}, "empty body\n"
    return {"method": method, "subpath": subpath, "bytes": len(body),
            "agent": headers.get("user-agent", "")}
