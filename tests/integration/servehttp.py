"""The HTTP side of servemix.py: the requests a draw sends to `polybus serve`, the response
each must get (its handler, tests/integration/apps/servemix/web.py, called in this
process and its value made a response as the replica makes it), and the clients that
send them: several connections at once, each kept alive, closed after each request,
HTTP/1.0, or pipelined (up to four requests written before their answers are read);
and clients that hang up while their request runs.

Plain sockets and a small reader of responses (Content-Length framing, which the front
door always uses), so that what is on the wire is what is checked.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

from polybus.http.response import error_response, to_response
from polybus.http.routes import RouteTable

WEB = Path(__file__).resolve().parent / "apps" / "servemix" / "web.py"
# app.toml's routes: (method, path) -> (module, handler)
ROUTES: dict[tuple[str | None, str], tuple[str, str]] = {
    ("GET", "/square"): ("w1", "square"), (None, "/echo/*"): ("w1", "echo"),
    ("GET", "/blob"): ("w1", "blob"), ("GET", "/slow"): ("w1", "slow"),
    ("GET", "/ranked"): ("w2", "ranked"), ("POST", "/digest"): ("w2", "digest"),
    ("GET", "/shaped"): ("w2", "shaped"), ("GET", "/files/*"): ("w2", "files")}
TABLE = RouteTable([(m, p, t) for (m, p), t in ROUTES.items()])
ROUTE_KEY = {t[1]: (f"{m} {p}" if m else p) for (m, p), t in ROUTES.items()}
BODIES = [b"tiny body", bytes(range(256)) * 80, hashlib.sha256(b"x").digest() * 3200]
CONN_KINDS = ("keep-alive", "close", "http/1.0", "pipelined")
Got = tuple[int, dict[str, str], bytes]  # status, headers (names in lower case), body

_web: ModuleType | None = None


def web() -> ModuleType:
    """The handlers' module, imported here (its marks off: no ``$MIX_MARKS`` here; its
    sleeps too, which change no answer)."""
    global _web
    if _web is None:
        spec = importlib.util.spec_from_file_location("servemix_web", WEB)
        assert spec is not None and spec.loader is not None
        _web = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_web)
        _web._sleep = lambda seconds: None
    return _web


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def target(self) -> str:
        return self.path + ("?" + urlencode(self.query) if self.query else "")

    def wire(self, close: bool = False, v10: bool = False) -> bytes:
        lines = [f"{self.method} {self.target} HTTP/{'1.0' if v10 else '1.1'}", "Host: h"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        if self.body or self.method == "POST":
            lines.append(f"Content-Length: {len(self.body)}")
        if close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body

    def route(self) -> tuple[str, str] | None:
        """(module, handler) of the route that serves it; None for a 404 or 405."""
        return TABLE.match(self.method, self.path).target


def requests(seed: int, n: int = 48) -> list[Req]:
    """The requests of a draw: every route, a 404, a 405, a HEAD; bodies small and
    large, each sent more than once (the same bytes: a cached operand is named again)."""
    r = random.Random(f"servemix requests {seed}")
    out: list[Req] = []
    for i in range(n):
        kind = r.choice(["square", "square", "echo", "blob", "ranked", "ranked", "digest",
                         "shaped", "shaped", "files", "head", "odd"])
        q: tuple[tuple[str, str], ...] = (("n", str(i)),)
        if kind == "square":
            out.append(Req("GET", "/square", q))
        elif kind == "echo":
            sub = r.choice(["", "/a", "/a/b.txt"])
            t = (("t", "x" * r.randint(0, 3)),) if r.random() < 0.7 else ()
            body = r.choice([b"", BODIES[0], BODIES[1]])
            out.append(Req(r.choice(["GET", "POST", "PUT"]), "/echo" + sub, q + t, body,
                           (("X-Tag", f"tag{i}"),)))
        elif kind == "blob":
            out.append(Req("GET", "/blob", (*q, ("k", str(r.choice([1, 3, 96]))))))
        elif kind == "ranked":
            out.append(Req("GET", "/ranked", (("i", str(i)), ("p", "y" * r.randint(0, 6)))))
        elif kind == "digest":
            out.append(Req("POST", "/digest", q, r.choice(BODIES)))
        elif kind == "shaped":
            out.append(Req("GET", "/shaped", q))
        elif kind == "files":
            out.append(Req("GET", r.choice(["/files", "/files/x", "/files/d/e.html"]), q))
        elif kind == "head":
            out.append(Req("HEAD", "/square", q))
        else:
            out.append(r.choice([Req("GET", "/nowhere", q), Req("DELETE", "/square", q)]))
    for k in range(2):  # (past the /slow route's timeout, where one is drawn: its 504)
        out.insert(r.randrange(len(out)), Req("GET", "/slow", (("s", "0.6"), ("n", str(n + k)))))
    return out


def expected(req: Req, priority_reads: dict[str, str], late: float | None = None) -> Got:
    """The response ``req`` must get: its handler called here; ``priority_reads``: the
    query key each handler's drawn priority reads (a request without it is a 400);
    ``late``: the timeout of the ``/slow`` route, where one was drawn (a request whose
    handler sleeps longer is a 504)."""
    m = TABLE.match(req.method, req.path)
    if m.target is None:
        if m.allowed:
            return 405, {"allow": ", ".join(m.allowed)}, b""
        return 404, {}, b""
    _, name = m.target
    query = dict(req.query)
    if name in priority_reads and priority_reads[name] not in query:
        return 400, {}, b""
    if name == "slow" and late is not None and float(query["s"]) > late:
        return 504, {}, b""
    fn = getattr(web(), name)
    every = {"method": req.method, "path": req.path, "query": query, "body": req.body,
             "headers": {k.lower(): v for k, v in req.headers}, "subpath": m.subpath}
    params = inspect.signature(fn).parameters
    try:
        status, headers, body = to_response(fn(**{k: v for k, v in every.items()
                                                  if k in params}), f"{name}()")
    except Exception as e:
        status, headers, body = error_response(500, f"{type(e).__name__}: {e}")
    return status, {k.lower(): v for k, v in headers}, b"" if req.method == "HEAD" else body


def differs(req: Req, want: Got, got: Got) -> str:
    """'' if ``got`` is ``want`` (for a 400, 404 or 405 its status, and Allow), else how
    they differ."""
    if got[0] != want[0]:
        return f"status {got[0]} (want {want[0]}): {got[2][:300]!r}"
    if want[0] in (400, 404, 405, 504):
        return "" if want[0] != 405 or got[1].get("allow") == want[1]["allow"] else \
            f"Allow {got[1].get('allow')!r} (want {want[1]['allow']!r})"
    if got[1].get("content-type") != want[1].get("content-type"):
        return f"content-type {got[1].get('content-type')!r} (want {want[1].get('content-type')!r})"
    extra = {k: v for k, v in want[1].items() if k != "content-type" and got[1].get(k) != v}
    if extra:
        return f"headers {got[1]} lack {extra}"
    if got[2] != want[2]:
        return f"body {got[2][:200]!r} (want {want[2][:200]!r})"
    return ""


def _read(f: Any, head: bool) -> Got:
    """One response from the buffered reader ``f``."""
    line = f.readline()
    if not line:
        raise ConnectionError("closed before a response")
    status = int(line.split()[1])
    headers: dict[str, str] = {}
    while (h := f.readline()) not in (b"\r\n", b""):
        k, _, v = h.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    n = 0 if head or status in (204, 304) else int(headers.get("content-length", "0"))
    body = f.read(n) if n else b""
    if len(body) != n:
        raise ConnectionError(f"closed {len(body)} bytes into a body of {n}")
    return status, headers, body


@dataclass
class Clients:
    """Each connection's requests (by index) and how it sends them."""
    conns: list[tuple[str, list[int]]]
    got: dict[int, Got | str] = field(default_factory=dict)  # a Got, or what went wrong
    quit: threading.Event = field(default_factory=threading.Event)  # serve has ended, or stops
    halfway: threading.Event = field(default_factory=threading.Event)  # half are answered

    @staticmethod
    def draw(seed: int, n: int) -> Clients:
        r = random.Random(f"servemix clients {seed}")
        kinds = [r.choice(CONN_KINDS) for _ in range(r.choice([1, 2, 3, 4, 6]))]
        return Clients([(k, list(range(i, n, len(kinds)))) for i, k in enumerate(kinds)])

    def send_all(self, port: int, reqs: list[Req], timeout: float) -> None:
        """Every connection at once, each in a thread; each request's response (or what
        went wrong) in ``got``."""
        threads = [threading.Thread(target=self._conn, args=(port, reqs, kind, idx, timeout),
                                    daemon=True) for kind, idx in self.conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 1)

    def _conn(self, port: int, reqs: list[Req], kind: str, idx: list[int],
              timeout: float) -> None:
        end = time.monotonic() + timeout
        try:
            if kind in ("close", "http/1.0"):
                for i in idx:
                    with _dial(port, end, self.quit) as s:
                        s.sendall(reqs[i].wire(close=kind == "close", v10=kind == "http/1.0"))
                        self._got(i, _read(s.makefile("rb"), reqs[i].method == "HEAD"))
                        if s.recv(1):  # (the server closes after the answer)
                            self.got[i] = "bytes after a response on a closing connection"
                return
            with _dial(port, end, self.quit) as s:
                f = s.makefile("rb")
                step = 4 if kind == "pipelined" else 1
                for at in range(0, len(idx), step):
                    batch = idx[at:at + step]
                    s.sendall(b"".join(reqs[i].wire() for i in batch))
                    for i in batch:
                        self._got(i, _read(f, reqs[i].method == "HEAD"))
        except (OSError, ValueError) as e:
            for i in idx:
                self.got.setdefault(i, f"{kind} connection: {type(e).__name__}: {e}")


    def _got(self, i: int, answer: Got) -> None:
        self.got[i] = answer
        if 2 * len(self.got) >= sum(len(idx) for _, idx in self.conns):
            self.halfway.set()


def ready(port: int, timeout: float, quit: threading.Event) -> bool:
    """Whether the front door answered (a 404 for ``/ready``) within ``timeout``: it
    listens before its workers start, and reads requests once they have registered."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and not quit.is_set():
        try:
            with _dial(port, end, quit) as s:
                s.sendall(Req("GET", "/ready").wire(close=True))
                return _read(s.makefile("rb"), False)[0] == 404
        except OSError:
            time.sleep(0.05)
    return False


def _dial(port: int, end: float, quit: threading.Event) -> socket.socket:
    """A connection to the front door, asked until it accepts (it listens before the
    workers are up, and answers once they are), or ``quit`` is set."""
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=max(0.1, end - time.monotonic()))
        except ConnectionRefusedError:
            if time.monotonic() > end or quit.is_set():
                raise
            time.sleep(0.05)
            continue
        return s


HANG_UPS = ("close", "reset", "early")  # (hang-up n uses HANG_UPS[n % 3])


def hang_up(port: int, n: int, marks: Path, timeout: float, quit: threading.Event) -> bool:
    """A client that asks ``/slow?s=3&n=N`` and hangs up as ``HANG_UPS[n % 3]`` says:
    with a close or a reset once its handler has begun (its mark), or with a close at
    once ("early": the request may not have been read yet, or held at the front door).
    Whether it hung up while its request was in flight: early, or once its handler had
    begun; False if that had not begun within ``timeout`` (a 503, say: the connection
    is closed all the same)."""
    end = time.monotonic() + timeout
    how = HANG_UPS[n % 3]
    with _dial(port, end, quit) as s:
        s.sendall(Req("GET", "/slow", (("s", "3"), ("n", str(n)))).wire())
        if how == "early":
            return True
        reset = how == "reset"
        while time.monotonic() < end and not quit.is_set():
            with contextlib.suppress(OSError):
                if any(w[2:5:2] == ["slow", str(n)] for w in
                       map(str.split, marks.read_text().splitlines())):
                    if reset:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return True
            time.sleep(0.005)
    return False
