"""The sans-IO HTTP/1.1 request parser: bytes in, requests or a status out. No sockets."""

from __future__ import annotations

import pytest

from polybus.http.parser import ExpectContinue, HTTPError, Request, RequestParser


def parse(data: bytes, **limits: int) -> list[Request | ExpectContinue]:
    p = RequestParser(**limits)
    p.feed(data)
    out = []
    while (ev := p.next_event()) is not None:
        out.append(ev)
    return out


def error(data: bytes, **limits: int) -> HTTPError:
    with pytest.raises(HTTPError) as info:
        parse(data, **limits)
    return info.value


def test_a_get_with_query_and_headers() -> None:
    (req,) = parse(b"GET /a%20b/c?x=1&y=&x=3 HTTP/1.1\r\nHost: h\r\nX-Tag: one\r\n"
                   b"x-tag: two\r\n\r\n")
    assert isinstance(req, Request)
    assert (req.method, req.path, req.target) == ("GET", "/a b/c", "/a%20b/c?x=1&y=&x=3")
    assert req.query == {"x": "3", "y": ""} and req.query_string == "x=1&y=&x=3"
    assert req.headers == {"host": "h", "x-tag": "one, two"}
    assert req.body == b"" and req.keep_alive


def test_bytes_arrive_one_at_a_time() -> None:
    data = b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    p = RequestParser()
    events = []
    for i in range(len(data)):
        p.feed(data[i:i + 1])
        if (ev := p.next_event()) is not None:
            events.append(ev)
    assert len(events) == 1 and isinstance(events[0], Request) and events[0].body == b"hello"


def test_pipelined_requests_come_out_in_order() -> None:
    reqs = parse(b"GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 2\r\n\r\nok"
                 b"GET /3 HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert [r.path for r in reqs if isinstance(r, Request)] == ["/1", "/2", "/3"]
    assert [r.keep_alive for r in reqs if isinstance(r, Request)] == [True, True, False]


def test_http10_closes_unless_asked_to_keep_alive() -> None:
    (a,) = parse(b"GET / HTTP/1.0\r\n\r\n")
    (b,) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
    assert isinstance(a, Request) and isinstance(b, Request)
    assert not a.keep_alive and b.keep_alive and a.version == "1.0"


def test_chunked_body_with_extension_and_trailer() -> None:
    (req,) = parse(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert isinstance(req, Request) and req.body == b"hello world"


def test_expect_continue_is_an_event_before_the_body() -> None:
    p = RequestParser()
    p.feed(b"PUT /f HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert isinstance(p.next_event(), ExpectContinue)
    assert p.next_event() is None
    p.feed(b"abc")
    req = p.next_event()
    assert isinstance(req, Request) and req.body == b"abc"


@pytest.mark.parametrize("data", [
    b"garbage\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/1.1 extra\r\n\r\n",
    b"GET noslash HTTP/1.1\r\n\r\n",
    b"GET / SPDY/3\r\n\r\n",
    b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
    b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n",
    b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
])
def test_malformed_requests_are_400(data: bytes) -> None:
    assert error(data).status == 400


def test_other_statuses() -> None:
    assert error(b"GET / HTTP/2.0\r\n\r\n").status == 505
    assert error(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").status == 501
    assert error(b"GET / HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n", max_head=1024).status == 431
    assert error(b"GET / HTTP/1.1\r\nX: " + b"a" * 2000, max_head=1024).status == 431


def test_bodies_over_the_limit_are_413_before_they_are_read() -> None:
    e = error(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", max_body=10)
    assert e.status == 413 and "11" in e.message
    chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n"
    assert error(chunked, max_body=10).status == 413
    (ok,) = parse(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", max_body=10)
    assert isinstance(ok, Request) and len(ok.body) == 10


def test_after_an_error_the_parser_gives_nothing_more() -> None:
    p = RequestParser()
    p.feed(b"bad\r\n\r\n")
    with pytest.raises(HTTPError):
        p.next_event()
    p.feed(b"GET / HTTP/1.1\r\n\r\n")
    assert p.closed and p.next_event() is None


def test_leading_empty_lines_are_ignored() -> None:
    (req,) = parse(b"\r\n\r\nGET /x HTTP/1.1\r\n\r\n")
    assert isinstance(req, Request) and req.path == "/x"
