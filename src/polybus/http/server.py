"""The front door's connections: bytes in (http/parser.py), a call, bytes out.

One asyncio task per connection serves its requests in order (pipelined ones too).
Every failure becomes a status and the server goes on: no route 404 (405 when only the
method is wrong), malformed 400 (and one the interface's ``priority`` cannot be computed
for: it reads a field this request lacks), too large 413/431, the handler raised 500
(its type and message; the remote traceback only with ``tracebacks = true``), the
replica's queue full under ``overflow = "reject"`` 503, a call past its timeout 504
(saying where the call was: http/calls.py), replicas gone 502. A client that closes its
connection while its request runs frees its slot at once, the call given up as at its
timeout (http/hangup.py).

Slow clients are bounded in time as well as in bytes: a request head must be whole
within ``head_timeout`` of its first byte (of its accept, for a connection that waited
for a slot), and a body may fall at most ``head_timeout`` behind ``min_body_rate``; past
either, 408 and the connection closes (``idle_timeout`` bounded each read only, so a
byte every few seconds held a slot for good). An answer must be taken: a client that
takes none of it for ``idle_timeout`` is cut off (the connection aborted, the bytes
dropped; they stayed in memory for as long as the client kept the connection), and the
last answer on a connection is followed by a close in stages (http/outgoing.py).
"""

from __future__ import annotations

import asyncio
import sys
import traceback
from dataclasses import dataclass
from functools import partial
from typing import Any

from polybus.config.model import RouteSpec, ServeSpec
from polybus.config.units import duration_text
from polybus.errors import (
    BusyError,
    CallTimeoutError,
    ConnectionLostError,
    NoReplicaError,
    PoisonCallError,
    PolybusError,
    PriorityError,
    RemoteException,
    WorkerDiedError,
)
from polybus.http.calls import CallBridge
from polybus.http.hangup import Watched
from polybus.http.outgoing import close_in_stages, drain, flush
from polybus.http.parser import ExpectContinue, HTTPError, Request, RequestParser, shown
from polybus.http.response import Response, error_response, serialize
from polybus.http.routes import RouteTable
from polybus.quieter import Quieter

__all__ = ["FrontDoor"]

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _fields(req: Request, subpath: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    if not wanted:
        return {}
    every = {"method": req.method, "path": req.path, "query": req.query,
             "headers": req.headers, "body": req.body, "subpath": subpath}
    return {k: every[k] for k in wanted}


@dataclass
class _Began:
    """When the request being read began (its head; its body), on the loop's clock."""

    head: float | None = None
    body: float | None = None


def _checked(value: Any) -> Response:
    """The replica's answer in response form ([status, [[name, value]...], body])."""
    status, headers, body = value
    if not isinstance(status, int) or not isinstance(body, bytes):
        raise TypeError("not a response")
    return status, [(str(n), str(v)) for n, v in headers], body


class FrontDoor:
    """Serves ``spec``'s routes through ``bridge`` (whose session binds each route key)."""

    def __init__(self, spec: ServeSpec, bridge: CallBridge,
                 timeouts: dict[str, float | None]) -> None:
        self.spec = spec
        self.bridge = bridge
        self.timeouts = timeouts
        self.table = RouteTable([(r.method, r.path, r) for r in spec.routes])
        # callstyle "sync": the route's requests are called one at a time, in order
        self._one_at_a_time = {r.key: asyncio.Lock() for r in spec.routes
                               if r.use.callstyle.kind == "sync"}
        self._slots = asyncio.Semaphore(spec.max_connections)
        self._full = Quieter()  # every slot taken: said once a minute, with the count
        self._refused: dict[str, Quieter] = {}  # 503s for a full queue, likewise, by route
        self.requests = 0
        # Each connection's task, and whether it is inside a request (`stop`).
        self._conns: dict[asyncio.Task[Any], bool] = {}
        self._quiet = asyncio.Event()  # no connection inside a request
        self._quiet.set()
        self.stopping = False  # no new request is read; those in flight finish
        self._cut = False      # the grace is over: those still in flight are answered 503

    async def connection(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = False
        accepted = asyncio.get_running_loop().time()
        proto = writer.transport.get_protocol()
        watched = proto if isinstance(proto, Watched) else None  # (http/hangup.py)
        if watched is not None:
            watched.task = task
        waiting = True  # for a slot
        try:
            if self.stopping:  # (accepted just before the listener closed)
                await self._unavailable(writer)
                return
            queued = self._slots.locked()
            if queued:
                self._slots_full()
            async with self._slots:  # over max_connections: accepted, served later
                waiting = False
                # (one that waited: its first request's head is timed from its accept,
                # what it sent meanwhile having been read into `reader`; else a crowd
                # of peers trickling heads kept a good client waiting for their heads'
                # timeouts one after another)
                await self._serve(reader, writer, _Began(accepted if queued else None),
                                  watched)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or went quiet; nothing to answer
        except asyncio.CancelledError:
            if watched is not None and watched.hung_up:  # (its request given up: said)
                task.uncancel()
                return
            if not self.stopping:
                raise
            # Inside a request past the grace, or waiting for a slot: answered 503 (the
            # one waiting was closed without a word, its request never answered).
            if waiting or self._conns.get(task):
                await self._unavailable(writer)
        except Exception as e:  # (a fault in the front door's steps: logged, not asyncio's
            # "Unhandled exception in client_connected_cb"; a request not yet answered
            # gets its 500, and the server serves on)
            out = self._fault("serving a connection", e)
            if self._conns.get(task):
                try:
                    writer.write(out)
                except ConnectionError:
                    pass
                else:
                    await flush(writer, 1.0)
        finally:
            self._busy(task, None)
            writer.close()

    def _slots_full(self) -> None:
        """Say that a connection waits for a slot (silent peers holding every one shut
        good clients out for their idle_timeout, and serve said nothing)."""
        n, idle = self.spec.max_connections, self.spec.idle_timeout
        said = self._full.let(
            f"all {n} connection slots ([serve] max_connections) are taken; new "
            f"connections wait, accepted, for one (a connection is held until it closes "
            f"or is silent for idle_timeout, {idle:g} s): raise max_connections or "
            f"lower idle_timeout if clients wait")
        if said is not None:
            print(f"polybus serve: {said}", file=sys.stderr, flush=True)

    def in_flight(self) -> int:
        """Connections inside a request now."""
        return sum(self._conns.values())

    def _busy(self, task: asyncio.Task[Any], busy: bool | None) -> None:
        """``task``'s connection is inside a request (True), between requests (False),
        or done (None)."""
        if busy is None:
            self._conns.pop(task, None)
        else:
            self._conns[task] = busy
        if any(self._conns.values()):
            self._quiet.clear()
        else:
            self._quiet.set()

    async def _unavailable(self, writer: asyncio.StreamWriter) -> None:
        writer.write(serialize(error_response(503, "the server is stopping"),
                               keep_alive=False, extra=[("Retry-After", "1")]))
        await flush(writer, 1.0)

    async def stop(self, grace: float, again: asyncio.Event) -> None:
        """Stop serving (the listener already closed): connections between requests are
        closed at once; requests in flight get ``grace`` s to finish (their connections
        closed after their answer), until ``again`` is set (a second signal); then each
        still in flight is answered 503. Every connection's task has ended on return."""
        self.stopping = True
        for task, busy in list(self._conns.items()):
            if not busy:
                task.cancel()
        if not self._quiet.is_set() and not again.is_set():
            waits = [asyncio.ensure_future(self._quiet.wait()),
                     asyncio.ensure_future(again.wait())]
            try:
                await asyncio.wait(waits, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        self._cut = True
        tasks = list(self._conns)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     began: _Began, watched: Watched | None = None) -> None:
        parser = RequestParser(max_head=self.spec.max_head, max_body=self.spec.max_body)
        # A drain waits for the last byte (not down to 16 KiB): nothing is left in the
        # transport when the connection closes, to be held for a client that never reads.
        writer.transport.set_write_buffer_limits(high=0)
        loop = asyncio.get_running_loop()
        while True:
            try:
                event = parser.next_event()
            except HTTPError as e:
                writer.write(serialize(error_response(e.status, e.message), keep_alive=False))
                await self._close(reader, writer)
                return
            except Exception as e:  # (a fault in the parser: this connection alone ends)
                writer.write(self._fault("reading a request", e))
                await self._close(reader, writer)
                return
            if event is None:
                now = loop.time()
                wait, late = self.spec.idle_timeout, self._deadline(parser, began, now)
                if late is not None and late[0] - now < wait:
                    wait = max(0.0, late[0] - now)  # (0: what has come is still read)
                else:
                    late = (0.0, f"request incomplete after {self.spec.idle_timeout:g} s")
                try:
                    async with asyncio.timeout(wait):  # (no task)
                        data = await reader.read(1 << 16)
                except TimeoutError:
                    if parser.pending:  # begun, never finished: say so (RFC 9110 15.5.9)
                        writer.write(serialize(error_response(408, late[1]),
                                               keep_alive=False))
                        await self._close(reader, writer)
                    return
                if not data:
                    return
                parser.feed(data)
            elif isinstance(event, ExpectContinue):
                writer.write(_CONTINUE)
            else:
                began.head = began.body = None  # (the next request's: from its first byte)
                task = asyncio.current_task()
                assert task is not None
                self._busy(task, True)
                if watched is not None:  # (the client's close now gives it up)
                    if watched.closed:  # (before it began: one that waited for a slot)
                        self._abandoned(event, None)
                        return
                    watched.watching, start = True, loop.time()
                try:
                    resp, extra = await self.respond(event)
                except asyncio.CancelledError:
                    if watched is not None and watched.hung_up:
                        self._abandoned(event, loop.time() - start)
                    raise
                finally:
                    if watched is not None:
                        watched.watching = False
                keep_alive = event.keep_alive and not self.stopping
                if keep_alive and event.version == "1.0":  # 1.0 closes unless told
                    extra.append(("Connection", "keep-alive"))
                try:
                    out = serialize(resp, keep_alive=keep_alive, extra=extra,
                                    head_only=event.method == "HEAD")
                except Exception as e:  # (checked before: a fault in polybus's steps)
                    doing = f"answering {event.method} {shown(event.target)}"
                    out, keep_alive = self._fault(doing, e), False
                writer.write(out)
                self._busy(task, False)  # (answered: a stop now closes it, flushed, no 503)
                if not keep_alive:
                    await self._close(reader, writer)
                    return
                await drain(writer, self.spec.idle_timeout)

    def _deadline(self, parser: RequestParser, began: _Began,
                  now: float) -> tuple[float, str] | None:
        """When the request being read must have come by (its head: ``head_timeout``
        after it began; its body: no more than ``head_timeout`` behind
        ``min_body_rate``), and what its 408 says; None between requests."""
        spec = self.spec
        if parser.in_body:
            if began.body is None:
                began.body = now
            return (began.body + spec.head_timeout + parser.body_received / spec.min_body_rate,
                    f"request body slower than min_body_rate ({spec.min_body_rate} bytes/s)")
        if parser.pending:
            if began.head is None:
                began.head = now
            return (began.head + spec.head_timeout,
                    f"request head not complete within {spec.head_timeout:g} s")
        return None

    async def _close(self, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        """The last answer written: drained, then a close in stages (RFC 9112 9.6)."""
        await close_in_stages(reader, writer, self.spec.idle_timeout, self.spec.head_timeout)

    async def respond(self, req: Request) -> tuple[Response, list[tuple[str, str]]]:
        """The response to ``req``, and headers the front door adds to it."""
        self.requests += 1
        m = self.table.match(req.method, req.path)
        route: RouteSpec | None = m.target
        if route is None:
            if m.allowed:
                return (error_response(405, f"{req.shown_path} takes {', '.join(m.allowed)}"),
                        [("Allow", ", ".join(m.allowed))])
            return error_response(404, f"no route for {req.method} {req.shown_path}"), []
        kwargs = _fields(req, m.subpath, route.fields)
        say, limit = partial(self._log, req, route), self.timeouts[route.key]
        try:
            lock = self._one_at_a_time.get(route.key)
            if lock is None:
                value = await self.bridge.call(route.key, kwargs, limit, dropped=say)
            else:
                async with lock:
                    value = await self.bridge.call(route.key, kwargs, limit, dropped=say)
        except RemoteException as e:
            text = f"{e.remote_type}: {e.remote_message}"
            self._log(req, route, f"500 {text}")
            if self.spec.tracebacks:
                text += f"\n\nremote traceback ({e.replica}):\n{e.remote_traceback}"
            return error_response(500, text), []
        except BusyError as e:
            # (said like the others, but once a minute a route with the count: a flood
            # of refusals is what overflow = "reject" is for, and a line each would bury
            # the rest of the log)
            said = self._refused.setdefault(route.key, Quieter()).let(f"503 {e}")
            if said is not None:
                self._log(req, route, said)
            return error_response(503, str(e)), [("Retry-After", "1")]
        except CallTimeoutError as e:
            self._log(req, route, f"504 {e}")
            return error_response(504, str(e)), []
        except PriorityError as e:  # (its expression reads what this request lacks: the
            # request's fault, not a bad upstream's; no call was made)
            self._log(req, route, f"400 {e}")
            return error_response(400, f"{route.module}.{route.interface}: {e}"), []
        except PolybusError as e:
            text, back = str(e), False
            if isinstance(e, NoReplicaError | ConnectionLostError):  # (http/revival.py)
                more, back = self.bridge.after_loss(route.key)
                text += more
            elif isinstance(e, PoisonCallError | WorkerDiedError):  # (lost with its replica)
                text += self.bridge.ended(e.replica)
            self._log(req, route, f"502 {text}")
            # (lost replicas looked for again: when to ask again, as a 503 says it)
            again = [("Retry-After", "1")] if back else []
            return error_response(502, f"{route.module}.{route.interface}: {text}"), again
        except Exception as e:  # (a fault in polybus's own steps: this request's 500)
            # It escaped the connection's task, which closed without an answer, every
            # request of the route alike ("Unhandled exception in client_connected_cb").
            text = (f"polybus failed calling {route.module}.{route.interface}: "
                    f"{type(e).__name__}: {e}")
            self._log(req, route, f"500 {text}\n{traceback.format_exc().rstrip()}")
            return error_response(500, text), []
        try:
            return _checked(value), []
        except (TypeError, ValueError):
            return error_response(502, "the replica's answer is not a response"), []

    def _abandoned(self, req: Request, after: float | None) -> None:
        """Say that ``req``'s client closed its connection ``after`` s into it (its
        call given up, its slot freed: http/hangup.py), or before it began (None: no
        call made)."""
        route = self.table.match(req.method, req.path).target
        if route is None:  # (a request with no route is answered at once: not said)
            return
        if after is None:
            self._log(req, route, "abandoned by its client (it closed the connection "
                                  "before the request began); no call made")
        else:
            self._log(req, route, f"abandoned by its client (it closed the connection "
                                  f"{duration_text(after)} into the request); the call "
                                  f"is given up")

    def _fault(self, doing: str, exc: Exception) -> bytes:
        """A 500 that closes the connection, for a fault in the front door's own steps
        (logged; the server serves on)."""
        text = f"the front door failed {doing}: {type(exc).__name__}: {exc}"
        print(f"polybus serve: {text}", file=sys.stderr, flush=True)
        return serialize(error_response(500, text), keep_alive=False)

    def _log(self, req: Request, route: RouteSpec, what: str) -> None:
        print(f"polybus serve: {req.method} {shown(req.target)} -> {route.module}."
              f"{route.interface}: {what}", file=sys.stderr, flush=True)
