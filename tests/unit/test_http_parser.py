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
    data = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
    p = RequestParser()
    events = []
    for i in range(len(data)):
        p.feed(data[i:i + 1])
        if (ev := p.next_event()) is not None:
            events.append(ev)
    assert len(events) == 1 and isinstance(events[0], Request) and events[0].body == b"hello"


def test_pipelined_requests_come_out_in_order() -> None:
    reqs = parse(b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok"
                 b"GET /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert [r.path for r in reqs if isinstance(r, Request)] == ["/1", "/2", "/3"]
    assert [r.keep_alive for r in reqs if isinstance(r, Request)] == [True, True, False]


def test_http10_closes_unless_asked_to_keep_alive() -> None:
    (a,) = parse(b"GET / HTTP/1.0\r\n\r\n")
    (b,) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
    assert isinstance(a, Request) and isinstance(b, Request)
    assert not a.keep_alive and b.keep_alive and a.version == "1.0"


def test_chunked_body_with_extension_and_trailer() -> None:
    (req,) = parse(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    assert isinstance(req, Request) and req.body == b"hello world"


def test_expect_continue_is_an_event_before_the_body() -> None:
    p = RequestParser()
    p.feed(b"PUT /f HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert isinstance(p.next_event(), ExpectContinue)
    assert p.next_event() is None
    p.feed(b"abc")
    req = p.next_event()
    assert isinstance(req, Request) and req.body == b"abc"


@pytest.mark.parametrize("data", [
    b"garbage\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/1.1 extra\r\n\r\n",
    b"GET noslash HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET / SPDY/3\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: h\r\nno colon here\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n",
    # (latin-1 SUPERSCRIPT TWO: str.isdigit() took it, int() did not: no answer at all)
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \xb2\r\n\r\nab",
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
])
def test_malformed_requests_are_400(data: bytes) -> None:
    assert error(data).status == 400


def test_other_statuses() -> None:
    assert error(b"GET / HTTP/2.0\r\n\r\n").status == 505
    assert error(b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                 ).status == 501
    assert error(b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 2000 + b"\r\n\r\n", max_head=1024).status == 431
    assert error(b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 2000, max_head=1024).status == 431


def test_a_request_line_over_the_head_limit_is_414() -> None:
    """RFC 9112 3: a request-target longer than the server parses is 414 (URI Too
    Long); 431 is for header fields. The line over max_head alone was answered 431."""
    long_target = b"GET /" + b"a" * 2000
    assert error(long_target + b" HTTP/1.1\r\nHost: h\r\n\r\n", max_head=1024).status == 414
    assert error(long_target, max_head=1024).status == 414  # (its end not yet come)
    e = error(long_target + b"\n", max_head=1024)
    assert e.status == 414 and "request line longer than 1024 bytes" in str(e)


def test_bodies_over_the_limit_are_413_before_they_are_read() -> None:
    e = error(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", max_body=10)
    assert e.status == 413 and "11" in e.message
    chunked = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n"
    assert error(chunked, max_body=10).status == 413
    (ok,) = parse(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", max_body=10)
    assert isinstance(ok, Request) and len(ok.body) == 10


def test_after_an_error_the_parser_gives_nothing_more() -> None:
    p = RequestParser()
    p.feed(b"bad\r\n\r\n")
    with pytest.raises(HTTPError):
        p.next_event()
    p.feed(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
    assert p.closed and p.next_event() is None


def test_leading_empty_lines_are_ignored() -> None:
    (req,) = parse(b"\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n")
    assert isinstance(req, Request) and req.path == "/x"


def test_a_head_whose_lines_end_in_a_bare_lf_is_read() -> None:
    # A new user's `printf 'GET /echo/lf HTTP/1.1\nHost: x\n\n'` got no answer: the parser
    # waited for a CRLF that never came, until the idle timeout closed the connection.
    (req,) = parse(b"\nGET /lf?a=1 HTTP/1.1\nHost: x\r\nX-Y: z\n\r\n")
    assert isinstance(req, Request)
    assert (req.path, req.query, req.headers) == ("/lf", {"a": "1"}, {"host": "x", "x-y": "z"})
    a, b = parse(b"POST /1 HTTP/1.1\nHost: x\nContent-Length: 2\n\nokGET /2 HTTP/1.0\n\n")
    assert isinstance(a, Request) and isinstance(b, Request)
    assert (a.body, b.path) == (b"ok", "/2")


def test_a_bare_cr_in_a_header_is_still_malformed() -> None:
    assert error(b"GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n").status == 400


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nX: y\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
])
def test_an_http11_request_names_its_host_once(head: bytes) -> None:
    e = error(head)
    assert (e.status, e.message) == (400, "an HTTP/1.1 request must name its Host, once")


def test_an_http10_request_needs_no_host() -> None:
    (req,) = parse(b"GET / HTTP/1.0\r\n\r\n")
    assert isinstance(req, Request) and req.path == "/"


@pytest.mark.parametrize(("target", "path"), [
    ("/echo/../../etc/passwd", "/etc/passwd"),
    ("/static/../secret", "/secret"),
    ("/static/%2e%2e/secret", "/secret"),
    ("/a/./b/.", "/a/b/"),
    ("/a/b/..", "/a/"),
    ("/a/.b/..c", "/a/.b/..c"),
    ("/a%20b/c", "/a b/c"),
])
def test_dot_segments_are_removed_from_the_path(target: str, path: str) -> None:
    (req,) = parse(f"GET {target}?q=1 HTTP/1.1\r\nHost: h\r\n\r\n".encode())
    assert isinstance(req, Request)
    assert (req.path, req.target, req.query) == (path, f"{target}?q=1", {"q": "1"})


@pytest.mark.parametrize("target", ["/a%00b", "/a%0Ab", "/%7f"])
def test_a_control_character_in_the_path_is_400(target: str) -> None:
    e = error(f"GET {target} HTTP/1.1\r\nHost: h\r\n\r\n".encode())
    assert (e.status, e.message) == (400, "a control character in the request path")


def test_pending_says_whether_a_request_is_begun() -> None:
    p = RequestParser()
    assert not p.pending
    p.feed(b"\r\n")
    assert not p.pending  # (empty lines before a request are no request)
    p.feed(b"GET / HT")
    assert p.next_event() is None and p.pending
    p.feed(b"TP/1.1\r\nHost: h\r\n\r\n")
    assert isinstance(p.next_event(), Request) and not p.pending
    p.feed(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nab")
    assert p.next_event() is None and p.pending  # (its body is not all here)


CHUNKED = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("body", [
    b"5;a\nb\r\nhello\r\n0\r\n\r\n",      # a bare LF inside a chunk extension
    b"5\n\r\nhello\r\n0\r\n\r\n",         # ... after the chunk size
    b"\n5\r\nhello\r\n0\r\n\r\n",         # ... before it
    b"5\r\nhello\r\n\n0\r\n\r\n",         # ... before a later one
    b"5\x0b\r\nhello\r\n0\r\n\r\n",       # a vertical tab after it (str.strip took it)
    b"5;a=\"b\rc\"\r\nhello\r\n0\r\n\r\n",  # a bare CR in an extension's value
    b"5\r\nhello\r\n0\r\nnot a field\r\n\r\n",      # a trailer line that is no field
    b"5\r\nhello\r\n0\r\nX: a\x00b\r\n\r\n",        # a NUL in a trailer field's value
    b"5\r\nhello\r\n0\r\nX\n: a\r\n\r\n",            # a bare LF in a trailer field's name
    # a bare LF ending the trailer section: "0\r\n\n" ends the body for a peer that
    # takes a bare LF there, and the request after it was dropped here as trailers
    b"5\r\nhello\r\n0\r\n\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n",
])
def test_chunk_framing_lines_with_a_bare_lf_or_control_character_are_400(body: bytes) -> None:
    """RFC 9112 7.1: a chunk-size line is hex digits, then chunk extensions (tokens or
    quoted strings), then CRLF; a trailer line is a field line (7.1.2). The parser took
    anything before a CRLF after the size (a bare LF in an extension: the funky-chunks
    smuggling of 2024, a peer that ends the line at the LF reading another body) and
    dropped any trailer line unread."""
    assert error(CHUNKED + body).status == 400


def test_valid_chunk_extensions_and_trailers_are_still_read() -> None:
    (req,) = parse(CHUNKED + b"5 ;a=1;b=\"x y\"\r\nhello\r\n6\t; c\r\n world\r\n0\r\n"
                   b"X-Sum: abc\r\nY:\r\n\r\n")
    assert isinstance(req, Request) and req.body == b"hello world"


@pytest.mark.parametrize(("coding", "status"), [
    (b"chunked, gzip", 400),    # RFC 9112 6.3: chunked not the final coding: MUST 400
    (b"chunked, chunked", 400),  # RFC 9112 7: chunked is applied only once
    (b"gzip, chunked", 501),    # a coding not understood: 501 (RFC 9112 6.1)
    (b"gzip", 400),
    (b"", 400),
    (b"Chunked ,", 200),        # (an empty list element is ignored, RFC 9110 5.6.1.2)
])
def test_transfer_codings_whose_last_is_not_chunked_once_are_400(coding: bytes,
                                                                 status: int) -> None:
    data = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: " + coding + b"\r\n\r\n"
    if status == 200:
        (req,) = parse(data + b"2\r\nok\r\n0\r\n\r\n")
        assert isinstance(req, Request) and req.body == b"ok"
    else:
        assert error(data).status == status


def test_transfer_encoding_in_an_http10_request_is_400() -> None:
    """RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding is to be treated as if
    its framing were faulty (an HTTP/1.0 peer before the server does not know chunked);
    it was read as chunked, and the connection kept for a request after it."""
    e = error(b"POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n"
              b"\r\n0\r\n\r\nGET /2 HTTP/1.0\r\n\r\n")
    assert e.status == 400 and "HTTP/1.0" in e.message


def test_an_http10_expect_100_continue_is_ignored() -> None:
    """RFC 9110 10.1.1: a server MUST ignore a 100-continue expectation in an HTTP/1.0
    request (an HTTP/1.0 client does not know 100 Continue, which came as its answer)."""
    p = RequestParser()
    p.feed(b"PUT /f HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
    assert p.next_event() is None
    p.feed(b"abc")
    req = p.next_event()
    assert isinstance(req, Request) and req.body == b"abc"


@pytest.mark.parametrize("head", [
    b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",      # two, in an HTTP/1.0 request
    b"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",              # no host has a space
    b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n",
    b"GET / HTTP/1.0\r\nHost: \xe9\r\n\r\n",
])
def test_a_host_given_twice_or_not_a_host_is_400(head: bytes) -> None:
    """RFC 9112 3.2: a server MUST answer 400 to any request with more than one Host
    line or a Host whose value is invalid (uri-host [":" port], RFC 9110 7.2); only an
    HTTP/1.1 request's duplicates were refused, and any value taken."""
    assert error(head).status == 400


@pytest.mark.parametrize("host", [b"", b"example.com", b"example.com:8080", b"127.0.0.1:80",
                                  b"[::1]:8080", b"a-b.c_d~e%41", b"a,b"])
def test_valid_hosts_are_taken(host: bytes) -> None:
    (req,) = parse(b"GET / HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
    assert isinstance(req, Request) and req.headers["host"] == host.decode()


@pytest.mark.parametrize("line", [b"GET / HTTP/1.1\r", b"GET / HTTP/1.1\x0b", b"GET / HTTP/1.10",
                                  b"GET / HTTP/1.1x"])
def test_a_version_that_is_no_http_version_is_400_not_505(line: bytes) -> None:
    """RFC 9112 2.3: HTTP-version is "HTTP/" DIGIT "." DIGIT; anything else is an
    invalid request line (400, RFC 9112 3), not an unsupported version (505, which
    a bare CR after "HTTP/1.1" was answered)."""
    assert error(line + b"\r\nHost: h\r\n\r\n").status == 400
    assert error(b"GET / HTTP/3.0\r\nHost: h\r\n\r\n").status == 505
