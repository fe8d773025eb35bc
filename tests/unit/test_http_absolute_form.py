"""A request target in absolute form (``GET http://host/path HTTP/1.1``): RFC 9112
3.2.2 says a server must accept it, routing by its path and query as if sent in
origin form; its authority is checked as a Host is, and other forms are refused."""

from __future__ import annotations

import pytest

from polybus.http.parser import HTTPError, Request, RequestParser


def _one(line: bytes) -> Request:
    p = RequestParser()
    p.feed(line + b"\r\nHost: h\r\n\r\n")
    req = p.next_event()
    assert isinstance(req, Request)
    return req


@pytest.mark.parametrize(("target", "path", "query"), [
    (b"http://h/a%20b/c?x=1", "/a b/c", {"x": "1"}),
    (b"HTTP://example.com:8080/p", "/p", {}),
    (b"https://h", "/", {}),
    (b"http://h?q=2", "/", {"q": "2"}),
    (b"http://[::1]:80/x/../y", "/y", {}),
])
def test_an_absolute_target_is_routed_by_its_path(target: bytes, path: str,
                                                  query: dict[str, str]) -> None:
    req = _one(b"GET " + target + b" HTTP/1.1")
    assert (req.path, req.query, req.target) == (path, query, target.decode())
    assert req.shown_path == path


@pytest.mark.parametrize("target", [
    b"ftp://h/x",             # not an http URI
    b"http:///x",             # no host
    b"http://u@h/x",          # userinfo (RFC 9110 4.2.4)
    b"http://h/x#frag",       # a fragment is never sent
    b"http://h x/",           # (a space splits the line: malformed)
    b"h/x",                   # no scheme, not a path
    b"http://h:port/x",       # port not digits
])
def test_other_targets_are_refused_with_400(target: bytes) -> None:
    p = RequestParser()
    p.feed(b"GET " + target + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    with pytest.raises(HTTPError) as info:
        p.next_event()
    assert info.value.status == 400
