"""direct.py's inline serving over a plain socket, in one Python frame.

The twin of client/socketlane.py on the replica's side. A sync client's calls over
``tcp`` or ``ipc`` come one at a time, each a lone small frame. The general steps
(the channel's fill, the spinner, the frame decoder's buffer and header calls, the
codec's and the channel's send calls) were two thirds of a replica's Python per
call. Here one loop spins on the socket (an ``epoll`` look, each turn yielding the
CPU), reads what came into a bytes object, and when that is exactly one plain frame
(no buffers, no flags) decodes its header where it lies, runs the call and writes
the answer.

Anything else goes back to direct.serve's general loop, with nothing lost: bytes that
are not one plain frame (part of a frame, several frames, a frame with buffers) are
fed to the channel's decoder first, and a message that is not a plain call (control,
an unknown interface, a queue that is busy or paused, cached operands to look up) is
handed over as it was decoded.
"""

from __future__ import annotations

import select
import socket
import time
from threading import get_ident
from typing import TYPE_CHECKING

from polybus.errors import TransportError
from polybus.transport.channel import LATER, Channel
from polybus.transport.spinning import yield_cpu
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Message, Result
from polybus.worker import unread
from polybus.worker.busy import IDLE
from polybus.worker.forwarding import to_finish
from polybus.worker.replies import UNSENDABLE, failure, write

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["READ_MAX", "serve_socket", "usable"]

READ_MAX = 64 * 1024  # one read's most; a lone call's frame is far smaller
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def usable(rt: WorkerRuntime, ch: Channel) -> bool:
    """Whether `serve_socket` may serve ``ch``: a plain (not TLS) socket channel with
    nothing already in its decoder, on a replica that runs calls at full speed."""
    return (type(ch) is Channel and not ch.tls and _DONTWAIT != 0 and ch.decoder.empty
            and rt.options.speed >= 1.0 and hasattr(select, "epoll"))


def serve_socket(rt: WorkerRuntime, ch: Channel, fair_s: float
                 ) -> tuple[bool | None, Message | None]:
    """Serve ``ch``'s lone plain calls (`usable` said yes; the poller role held).

    Returns ``(done, None)`` when direct.serve returns ``done`` at once (True: the role
    is still held), or ``(None, msg)`` when its general loop goes on from here, with
    ``msg`` as the first message to handle (None: the next one in the decoder)."""
    functions = rt.lone_functions
    queue = rt._queue
    lock = rt._lock
    clock = time.perf_counter
    spin_s = rt.options.spin_s
    sock = ch.sock
    codec = ch.codec
    decode_lone = codec.decode_lone
    encode = codec.encode
    send_lock = ch.send_lock
    poll = ch.look().poll
    decoder = ch.decoder
    threads_busy, me = rt._threads_busy, get_ident()  # (busy.py's, inlined)
    while True:
        # Wait for bytes: a look, then a read; for the spin window at most.
        deadline = 0.0
        try:
            while not poll(0):
                now = clock()
                if not deadline:
                    if ch.closed or now - rt._selected >= fair_s or rt._stopping:
                        return True, None
                    deadline = now + spin_s
                elif now >= deadline:
                    rt._calls_seen = rt.calls  # the window was spent here: sleep next
                    return True, None
                yield_cpu()
            if not decoder.empty:  # another thread read meanwhile (a call ran): its way
                return None, None
            data = sock.recv(READ_MAX, _DONTWAIT)
        except BlockingIOError:
            continue
        except (OSError, ValueError):  # broken, or closed by another thread meanwhile
            ch.closed = True
            rt._drop(ch)
            return True, None
        n = len(data)
        if not n:  # the client closed its end
            ch.closed = True
            rt._drop(ch)
            return True, None
        ch.bytes_received += n
        msg = decode_lone(data)
        if msg is None:  # not one plain frame: the decoder takes (or refuses) it
            decoder.feed(data)
            return None, None
        if (type(msg) is not Call or msg.iface not in functions or queue._live
                or rt._paused or msg.kwargs or msg.prio != msg.prio  # (NaN: _admit's)
                or ch.unsent  # (answers it has not read: intake's _stick)
                or msg.inside is not None  # (operands inside an argument, as below)
                or msg.again):  # (sent again after a loss: the general run, direct.py)
            return None, msg
        args = msg.args
        for a in args:
            if type(a) is Ref:  # cached operands: the general loop looks them up
                return None, msg
        with lock:  # run it, the role let go meanwhile (as direct.serve does)
            rt._polling = False
            if rt._heeding:  # (`WorkerRuntime._let_role_go`'s steps, written out)
                rt._heed_cv.notify_all()
            rt._running += 1
            rt._started += 1
            if rt._running < rt.options.pool:
                rt._cv.notify()
        # direct._answer's steps, written out here (one Python frame less a call)
        try:
            done = threads_busy.get(me, IDLE)[0]
            t0 = clock()
            threads_busy[me] = (done, t0)
            reply: Message
            try:
                reply = Result(msg.id, functions[msg.iface](*args))
            except BaseException as exc:  # (as WorkerRuntime._run)
                reply = failure(msg.id, exc, functions[msg.iface], args)
            spent = clock() - t0
            threads_busy[me] = (done + spent, 0.0)
            rt.busy_s += spent
            rt.calls += 1
            if to_finish(rt.forwarding, reply):
                reply = rt.forwarding.finished(ch, msg, reply)
            if not ch.closed:  # the answer: Channel.send's steps, a one-piece frame written here
                unsendable = False
                with send_lock:  # (held while encoding too: the codec is the connection's)
                    try:
                        pieces = encode(reply)
                        if len(pieces) == 1 and type(p := pieces[0]) is bytes and not ch.unsent:
                            try:
                                sent = sock.send(p, _DONTWAIT)  # (never waits: unread.py)
                            except BlockingIOError:
                                sent = 0
                            ch.bytes_sent += sent
                            if sent != len(p):
                                ch._send_pieces([memoryview(p)[sent:]], LATER)
                        else:
                            ch._send_pieces(pieces, LATER)
                    except OSError:
                        ch.closed = True  # the client is gone; the poller drops its connection
                    except TransportError:
                        pass
                    except UNSENDABLE:
                        unsendable = True
                if unsendable:
                    write(ch, [reply])  # answers the call with why its result cannot be sent
                elif ch.unsent:
                    unread.catch_up(ch)
        except BaseException as exc:  # a fault in polybus's steps: the call fails alone
            rt.fault(ch, msg.id, exc)
        with lock:
            rt._running -= 1
            if (rt._polling or rt._running or queue._live or rt._stopping or rt._corked.held
                    or rt._paused or ch.unsent):
                rt._room_for_paused()
                return False, None
            rt._polling = True

