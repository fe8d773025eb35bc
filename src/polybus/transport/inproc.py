"""``inproc://NAME``: a listener and its connections within one process, for tests.

No network and no file: a listener is a name in this process's table, and a connection
a `socket.socketpair`, one end handed to the listener's `accept` and the other to the
dialler, which runs the same token handshake over it as over a Unix socket
(endpoints.py); the channels over it are ordinary `Channel`s. Another process cannot
reach the name (a child forked from this one starts with an empty table).

An `InprocListener` stands in for a listening socket where polybus uses one: `accept`
(blocking, with a timeout, or non-blocking after ``setblocking(False)``), a `fileno`
readable exactly while a connection waits to be accepted (for poll/epoll), `shutdown`
(a thread blocked in `accept` wakes with an OSError) and `close`; either frees the name.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections import deque
from dataclasses import dataclass

from polybus.errors import TransportError
from polybus.plural import plural
from polybus.transport.wake import Wake

__all__ = ["ONE_PROCESS", "InprocListener", "Peer", "dial", "listen"]

# Said where an inproc address is refused (a worker's or the registry's --listen): what
# listens there is dialled from other processes.
ONE_PROCESS = "an inproc:// address is reached only from within the process that listens (tests)"

_names_lock = threading.Lock()
_listeners: dict[str, InprocListener] = {}


def _forget_all() -> None:
    """In a forked child: no name of the parent is reachable from here."""
    global _names_lock
    _names_lock = threading.Lock()  # (another thread may have held it at the fork)
    _listeners.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all)


@dataclass(frozen=True)
class Peer:
    """Who an accepted inproc connection came from, as `accept` says it: the ``number``th
    connection to listener ``name`` (a peer in this process has no address of its own)."""

    name: str
    number: int

    def __str__(self) -> str:
        return f"in-process peer {self.number} of inproc://{self.name}"


class InprocListener:
    """The listening end of ``inproc://NAME`` (see the module's docstring)."""

    def __init__(self, name: str, backlog: int) -> None:
        self.name = name
        self.backlog = max(backlog, 1)
        self._ready = threading.Condition()
        self._pending: deque[socket.socket] = deque()
        self._wake = Wake()  # rung while a connection waits: what poll/epoll see
        self._timeout: float | None = None
        self._accepting = True
        self._closed = False
        self._accepted = 0

    # -- the listening socket's surface ---------------------------------------------
    def fileno(self) -> int:
        return -1 if self._closed else self._wake.fileno()

    def setblocking(self, flag: bool) -> None:
        self._timeout = None if flag else 0.0

    def settimeout(self, value: float | None) -> None:
        self._timeout = value

    def gettimeout(self) -> float | None:
        return self._timeout

    def accept(self) -> tuple[socket.socket, Peer]:
        """The next connection waiting, as `socket.accept` would give it: OSError once
        shut down or closed, BlockingIOError if non-blocking and none waits,
        TimeoutError if none came within the timeout."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._pending or not self._accepting,
                                        self._timeout):
                if self._timeout == 0.0:
                    raise BlockingIOError(errno.EAGAIN, "no connection waiting")
                raise TimeoutError("timed out")
            if not self._accepting:
                raise OSError(errno.EBADF if self._closed else errno.EINVAL,
                              f"inproc://{self.name} is not listening")
            sock = self._pending.popleft()
            if not self._pending:
                self._wake.clear()
            self._accepted += 1
            return sock, Peer(self.name, self._accepted)

    def shutdown(self, how: int = socket.SHUT_RDWR) -> None:
        """Stop listening: the name is free, diallers are refused, and a thread blocked
        in `accept` wakes with an OSError. Connections not yet accepted are closed."""
        with _names_lock:
            if _listeners.get(self.name) is self:
                del _listeners[self.name]
        with self._ready:
            self._accepting = False
            pending, self._pending = list(self._pending), deque()
            self._wake.clear()
            self._ready.notify_all()
        for sock in pending:
            sock.close()  # (its dialler's handshake sees the connection closed)

    def close(self) -> None:
        if self._closed:
            return
        self.shutdown()
        with self._ready:
            self._closed = True
            self._wake.close()

    def __repr__(self) -> str:
        state = "listening" if self._accepting else "closed" if self._closed else "shut down"
        return f"<InprocListener inproc://{self.name} {state}>"

    # -- the dialler's side ----------------------------------------------------------
    def _offer(self, sock: socket.socket) -> None:
        with self._ready:
            if not self._accepting:
                raise TransportError(f"cannot connect to inproc://{self.name}: it has "
                                     "stopped listening")
            if len(self._pending) >= self.backlog:
                waiting = plural(len(self._pending), "connection")
                raise TransportError(f"cannot connect to inproc://{self.name}: its backlog "
                                     f"is full ({waiting} waiting to be accepted)")
            self._pending.append(sock)
            self._wake.ring()
            self._ready.notify()


def listen(name: str, backlog: int = 128) -> InprocListener:
    """Listen at ``inproc://NAME``; a TransportError if a listener of this process has
    that name already."""
    listener = InprocListener(name, backlog)
    with _names_lock:
        if name not in _listeners:
            _listeners[name] = listener
            return listener
    listener.close()
    raise TransportError(f"cannot listen on inproc://{name}: a listener of this process "
                         "has that name already (close it first, or choose another name)")


def dial(name: str, timeout: float | None) -> socket.socket:
    """This side of a new connection to ``inproc://NAME``, its other end queued for the
    listener's `accept`; the handshake is the caller's (endpoints.connect)."""
    with _names_lock:
        listener = _listeners.get(name)
    if listener is None:
        raise TransportError(f"cannot connect to inproc://{name}: no listener of that name "
                             "in this process (inproc addresses reach only listeners of "
                             "the process that dials them)")
    mine, theirs = socket.socketpair()
    try:
        listener._offer(theirs)
    except BaseException:
        mine.close()
        theirs.close()
        raise
    mine.settimeout(timeout)
    return mine
