"""HTTP/1.1 requests from bytes, with no sockets: ``feed(data)``, then ``next_event()``.

The front door's I/O layer (http/server.py) owns the socket; this only turns the bytes
a client sent into `Request` events, or an `HTTPError` naming the status to answer with
(400 malformed, framing included: RFC 9112 6 and 7.1; 413 body too large, 414 request
line too long, 431 head too large, 501 unknown transfer coding before chunked).
Bodies come with a Content-Length or in chunks; requests may be pipelined. The head's
lines may end in a bare LF (RFC 9112 2.2 lets a server take it; such a request was
left waiting for a CRLF that never came). An HTTP/1.1 request must say its Host, and
no request may say it twice or as other than host[:port] (RFC 9112 3.2). A target in
absolute form ("http://host/path", RFC 9112 3.2.2) is routed by its path and query.
The path is percent-decoded and its dot segments removed (RFC 3986 5.2.4), so
"/static/../secret" is "/secret", routed as such, never a subpath
"/../secret" of /static/*; a control character in it (%00, %0A) is a 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, unquote_to_bytes

__all__ = ["ExpectContinue", "HTTPError", "Request", "RequestParser", "shown"]

_TOKEN_RE = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_TOKEN = re.compile(_TOKEN_RE)  # (fullmatch: "$" would take a name ending in LF)
_VERSION = re.compile(rb"^HTTP/1\.([01])$")
# RFC 9112 7.1.1: chunk-size [chunk-ext] CRLF, chunk-ext = *( BWS ";" BWS name [ BWS "="
# BWS ( token / quoted-string ) ] ); SP or HTAB may end it (never a CR, LF or other CTL)
_QUOTED_RE = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,16})(?:[ \t]*;[ \t]*%s(?:[ \t]*=[ \t]*(?:%s|%s))?)*"
                         rb"[ \t]*" % (_TOKEN_RE, _TOKEN_RE, _QUOTED_RE))
# RFC 9110 7.2: Host = uri-host [ ":" port ]; uri-host an IP literal in brackets, or a
# reg-name (unreserved, pct-encoded, sub-delims: RFC 3986 3.2.2), an IPv4 address being one
_HOST = re.compile(r"(?:\[[0-9A-Za-z.:_~!$&'()*+,;=-]+\]"
                   r"|(?:[0-9A-Za-z._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?")
# RFC 9112 3.2.2: absolute-form = absolute-URI; an http(s) one: authority, then an
# optional path-abempty and query (no fragment, no userinfo: "@" is not in _HOST)
_ABSOLUTE = re.compile(r"(?i:https?)://([^/?#]*)((?:/[^?#]*)?(?:\?[^#]*)?)")
_DIGITS = re.compile(r"[0-9]{1,19}")  # (ASCII digits: str.isdigit takes "²", which int() refuses)
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(rb"\r?\n")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class HTTPError(Exception):
    """The request cannot be served; answer ``status`` and close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Request:
    """One request, decoded. Header names are lower case; repeated ones are joined
    with ", " (RFC 9110 5.3). ``path`` is percent-decoded, without the query."""

    method: str
    target: str                      # as sent: "/a%20b?x=1"
    path: str                        # "/a b"
    query: dict[str, str]            # a key given twice keeps its last value
    headers: dict[str, str]
    body: bytes = b""
    keep_alive: bool = True
    version: str = "1.1"
    query_string: str = ""

    @property
    def shown_path(self) -> str:
        """``path`` as messages say it: its bytes, sent raw or percent-encoded, read as
        UTF-8 (``path`` reads a raw one a character a byte, "/hÃ©llo"; routing is by
        it, as sent). Not for routing: a byte that is not UTF-8 is shown "\\xff"."""
        raw = _origin_form(self.target).partition("?")[0]
        if raw == "*":
            return raw
        try:
            sent = unquote_to_bytes(raw.encode("latin-1"))
        except UnicodeEncodeError:  # (not a target as parsed: said as it is)
            return self.path
        return _without_dots(sent.decode("utf-8", "backslashreplace"))


def shown(target: str) -> str:
    """A request's ``target`` as sent (a character a byte) as messages say it: read as
    UTF-8, a byte that is not UTF-8 shown "\\xff"."""
    try:
        return target.encode("latin-1").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # (not a target as parsed: said as it is)
        return target


@dataclass(frozen=True)
class ExpectContinue:
    """The client waits for ``100 Continue`` before it sends the body."""


@dataclass
class _Head:
    method: str
    target: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    length: int | None = None        # Content-Length
    chunked: bool = False


class RequestParser:
    """One connection's requests. Limits are bytes: ``max_head`` for the request line
    and headers together, ``max_body`` for a body (after de-chunking)."""

    def __init__(self, *, max_head: int = 64 * 1024, max_body: int = 1 << 20) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self._buf = bytearray()
        self._head: _Head | None = None
        self._body = bytearray()
        self._chunk_left: int | None = None  # chunked: bytes left of the current chunk
        self._trailers = False
        self._told_continue = False
        self.closed = False                  # an error was raised; feed nothing more

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def pending(self) -> bool:
        """A request is begun and not complete (what an idle timeout then cuts off)."""
        return self._head is not None or bool(self._buf.strip(b"\r\n"))

    @property
    def in_body(self) -> bool:
        """The request's head is read; its body is not complete."""
        return self._head is not None

    @property
    def body_received(self) -> int:
        """Bytes of the body being read that have come (those of a next request after
        it too, if pipelined)."""
        return len(self._body) + len(self._buf) if self._head is not None else 0

    def next_event(self) -> Request | ExpectContinue | None:
        """The next complete request (or a request for ``100 Continue``), None if more
        bytes are needed; raises HTTPError, after which the connection must close."""
        if self.closed:
            return None
        try:
            return self._next()
        except HTTPError:
            self.closed = True
            raise

    def _next(self) -> Request | ExpectContinue | None:
        if self._head is None:
            if not self._parse_head():
                return None
            head = self._head
            assert head is not None
            # (RFC 9110 10.1.1: an HTTP/1.0 request's 100-continue is ignored; its
            # client knows no 100 Continue, and took it for the answer)
            if (head.headers.get("expect", "").lower() == "100-continue"
                    and head.version != "1.0"
                    and not self._told_continue and (head.chunked or head.length)
                    and not self._buf):
                self._told_continue = True
                return ExpectContinue()
        head = self._head
        assert head is not None
        done = self._read_chunked() if head.chunked else self._read_length(head.length or 0)
        if not done:
            return None
        self._head, body, self._body = None, bytes(self._body), bytearray()
        self._told_continue = False
        return _request(head, body)

    def _too_large(self) -> HTTPError:
        """The head is over ``max_head``: 414 when its request line alone is (RFC 9112
        3: a request-target longer than the server parses), else 431 (its fields)."""
        if self._buf.find(b"\n", 0, self.max_head) < 0:
            return HTTPError(414, f"request line longer than {self.max_head} bytes")
        return HTTPError(431, f"request head larger than {self.max_head} bytes")

    def _parse_head(self) -> bool:
        while True:  # RFC 9112 2.2: empty lines before a request are ignored
            if self._buf[:2] == b"\r\n":
                del self._buf[:2]
            elif self._buf[:1] == b"\n":
                del self._buf[:1]
            else:
                break
        m = _HEAD_END.search(self._buf)
        if m is None:
            if len(self._buf) > self.max_head:
                raise self._too_large()
            return False
        if m.end() > self.max_head:
            raise self._too_large()
        lines = _LINE_END.split(bytes(self._buf[:m.start()]))
        del self._buf[:m.end()]
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
            raise HTTPError(400, "malformed request line")
        version = _VERSION.match(parts[2])
        if version is None:
            if not re.fullmatch(rb"HTTP/[0-9]\.[0-9]", parts[2]):  # (RFC 9112 2.3)
                raise HTTPError(400, "malformed request line")
            raise HTTPError(505, "unsupported HTTP version")
        target = parts[1].decode("latin-1")
        if not (target.startswith("/") or target == "*"):
            _origin_form(target)  # (absolute form, RFC 9112 3.2.2; else a 400)
        if _CONTROL.search(target):  # (RFC 9112 3.2; its query went raw into serve's log)
            raise HTTPError(400, "a control character in the request target")
        head = _Head(parts[0].decode("ascii"), target, f"1.{version.group(1).decode()}")
        hosts = 0
        for line in lines[1:]:
            if not _field_line(line):
                raise HTTPError(400, "malformed header line")
            name, _, value = line.partition(b":")
            key = name.decode("ascii").lower()
            text = value.strip(b" \t").decode("latin-1")
            old = head.headers.get(key)
            head.headers[key] = text if old is None else f"{old}, {text}"
            hosts += key == "host"
        # RFC 9112 3.2: 400 for an HTTP/1.1 request without Host, and for any with two
        # Host lines or a Host that is not uri-host [":" port]
        if hosts > 1 or (hosts == 0 and head.version == "1.1"):
            raise HTTPError(400, "an HTTP/1.1 request must name its Host, once"
                            if head.version == "1.1" else "a request names its Host once")
        if hosts and not _HOST.fullmatch(head.headers["host"]):
            raise HTTPError(400, f"Host {head.headers['host']!r} is not a host[:port]")
        self._framing(head)
        self._head = head
        return True

    def _framing(self, head: _Head) -> None:
        coding = head.headers.get("transfer-encoding")
        length = head.headers.get("content-length")
        if coding is not None:
            if length is not None:  # RFC 9112 6.1: both is a smuggling attempt
                raise HTTPError(400, "both Transfer-Encoding and Content-Length")
            if head.version == "1.0":  # RFC 9112 6.1: its framing is taken as faulty (a
                # 1.0 peer before the server reads no chunks, and the next request differs)
                raise HTTPError(400, "Transfer-Encoding in an HTTP/1.0 request")
            # (empty list elements ignored, RFC 9110 5.6.1.2)
            codings = [c for c in (c.strip(" \t").lower() for c in coding.split(",")) if c]
            if codings[-1:] != ["chunked"] or codings.count("chunked") > 1:
                # RFC 9112 6.3: chunked not last, the body's end is unknown: MUST 400;
                # RFC 9112 7: chunked is applied once
                raise HTTPError(400, f"Transfer-Encoding {coding!r}: the last coding must "
                                     "be chunked, applied once")
            if len(codings) > 1:
                raise HTTPError(501, f"unsupported transfer coding {coding!r}")
            head.chunked = True
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
                raise HTTPError(400, "malformed Content-Length")
            head.length = int(next(iter(values)))
            if head.length > self.max_body:
                raise HTTPError(413, f"body of {head.length} bytes is over the limit of "
                                     f"{self.max_body}")

    def _read_length(self, n: int) -> bool:
        if len(self._buf) < n:
            return False
        self._body = self._buf[:n]
        del self._buf[:n]
        return True

    def _read_chunked(self) -> bool:
        while True:
            if self._trailers:  # trailer field lines until an empty one; they are dropped
                end = self._buf.find(b"\r\n")
                if end < 0:
                    return self._check_pending()
                if end and not _field_line(bytes(self._buf[:end])):  # (RFC 9112 7.1.2)
                    raise HTTPError(400, "malformed trailer line")
                del self._buf[:end + 2]
                if end == 0:
                    self._trailers = False
                    return True
                continue
            if self._chunk_left is None:
                end = self._buf.find(b"\r\n")
                if end < 0:
                    return self._check_pending()
                line = _CHUNK_LINE.fullmatch(bytes(self._buf[:end]))
                if line is None:  # (a bare LF or a control character in it too: a peer
                    # that ends the line there reads another chunk; RFC 9112 7.1.1)
                    raise HTTPError(400, "malformed chunk size line")
                del self._buf[:end + 2]
                n = int(line.group(1), 16)
                if len(self._body) + n > self.max_body:
                    raise HTTPError(413, f"chunked body over the limit of {self.max_body} bytes")
                if n == 0:
                    self._trailers = True
                    continue
                self._chunk_left = n
            if len(self._buf) < self._chunk_left + 2:
                return False
            if self._buf[self._chunk_left:self._chunk_left + 2] != b"\r\n":
                raise HTTPError(400, "chunk not followed by CRLF")
            self._body += self._buf[:self._chunk_left]
            del self._buf[:self._chunk_left + 2]
            self._chunk_left = None

    def _check_pending(self) -> bool:
        if len(self._buf) > self.max_head:  # a chunk-size or trailer line without end
            raise HTTPError(400, "chunk framing line too long")
        return False


def _origin_form(target: str) -> str:
    """``target`` as origin-form ("/path?query"): itself when so sent (or "*"); for an
    absolute-form "http://host[:port]/path?query", which RFC 9112 3.2.2 says a server
    must accept, its path (or "/") and query. The authority is checked as a Host is;
    another scheme, a userinfo (RFC 9110 4.2.4) or a fragment is a 400."""
    if target.startswith("/") or target == "*":
        return target
    m = _ABSOLUTE.fullmatch(target)
    if m is None:
        raise HTTPError(400, "request target must be a path or an http(s) URI")
    if not m.group(1) or not _HOST.fullmatch(m.group(1)):
        raise HTTPError(400, f"request target's host {m.group(1)!r} is not a host[:port]")
    rest = m.group(2)
    return rest if rest.startswith("/") else "/" + rest


def _field_line(line: bytes) -> bool:
    """``line`` is a field line: a token, a colon, a value without CR, LF, NUL or
    another control character but HTAB (RFC 9112 5, RFC 9110 5.5)."""
    name, sep, value = line.partition(b":")
    return (bool(sep) and _TOKEN.fullmatch(name) is not None
            and _BAD_VALUE.search(value) is None)


def _request(head: _Head, body: bytes) -> Request:
    connection = {t.strip().lower() for t in head.headers.get("connection", "").split(",")}
    keep = "keep-alive" in connection if head.version == "1.0" else "close" not in connection
    raw_path, _, qs = _origin_form(head.target).partition("?")
    path = _without_dots(unquote(raw_path)) if raw_path != "*" else raw_path
    if _CONTROL.search(path):
        raise HTTPError(400, "a control character in the request path")
    return Request(head.method, head.target, path,
                   dict(parse_qsl(qs, keep_blank_values=True)), head.headers, body, keep,
                   head.version, qs)


def _without_dots(path: str) -> str:
    """``path`` without "." and ".." segments (RFC 3986 5.2.4): a ".." past the root
    stays at the root; a trailing "." or ".." leaves the path ending in "/"."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")[1:]
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == "..":
            if out:
                out.pop()
            if last:
                out.append("")
        elif seg == ".":
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/" + "/".join(out)
