"""Which sockets have something to read: the worker's one poller, made lean.

`selectors` wraps each ready descriptor in a key tuple and checks masks in Python;
on a replica answering one call per wake-up that is a measurable share of a round
trip. Here ``poll`` hands back the registered objects themselves: epoll on Linux,
``selectors`` elsewhere.
"""

from __future__ import annotations

import select
import selectors
from collections.abc import Iterable
from typing import Any, Protocol

from polybus.transport.spinning import spin_until


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


# What a look at a connection's end watches for: its peer's end (POLLRDHUP, on Linux;
# elsewhere a closed one only), a reset, an error.
_ENDED = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR


class Hangup:
    """What `ReadPoller.poll` gives for a socket watched for its peer's end alone
    (`watch_end`): ``data``, the object it stands for, whose peer closed (or reset) it."""

    __slots__ = ("data",)

    def __init__(self, data: Any) -> None:
        self.data = data


class ReadPoller:
    """Read readiness for registered sockets, each with the object it stands for."""

    def __init__(self) -> None:
        self._data: dict[int, Any] = {}
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._sel = None if self._epoll is not None else selectors.DefaultSelector()

    def register(self, sock: _HasFileno, data: Any) -> None:
        """Watch ``sock`` for reading (again, if it was watched for its end alone)."""
        fd = sock.fileno()
        if self._epoll is not None:
            try:
                if type(self._data.get(fd)) is Hangup:
                    self._epoll.modify(fd, select.EPOLLIN)
                else:
                    self._epoll.register(fd, select.EPOLLIN)
            except FileNotFoundError:  # (an earlier socket of that number, closed while
                self._epoll.register(fd, select.EPOLLIN)  # watched: the kernel forgot it)
        else:
            assert self._sel is not None
            self._sel.register(fd, selectors.EVENT_READ)
        self._data[fd] = data

    def watch_end(self, sock: _HasFileno, data: Any) -> None:
        """Stop watching ``sock`` for reading, and watch it for its peer's end alone
        (closed or reset, what it sent left unread): `poll` gives ``Hangup(data)`` then.
        Where there is no epoll, it is forgotten instead (as `unregister`)."""
        fd = sock.fileno()
        if self._epoll is None:
            self.unregister(sock)
            return
        if fd not in self._data:
            raise KeyError(sock)
        self._epoll.modify(fd, select.EPOLLRDHUP)  # (EPOLLHUP, EPOLLERR: always)
        self._data[fd] = Hangup(data)

    def unregister(self, sock: _HasFileno) -> None:
        """Forget ``sock`` (KeyError if it was not registered, like selectors)."""
        fd = sock.fileno()
        if fd < 0 or fd not in self._data:
            raise KeyError(sock)
        del self._data[fd]
        try:
            if self._epoll is not None:
                self._epoll.unregister(fd)
            else:
                assert self._sel is not None
                self._sel.unregister(fd)
        except (OSError, KeyError, ValueError):
            pass  # closed meanwhile: the kernel already forgot it

    def poll(self, timeout: float, spin: float = 0.0) -> list[Any]:
        """The objects whose sockets are readable (or closed), waiting up to ``timeout`` s;
        with ``spin``, looking without sleeping for that long first (spinning.py)."""
        if spin and timeout:
            ready = spin_until(self._poll_now, spin)
            if ready:
                return ready
        return self._poll_at_most(timeout)

    def _poll_now(self) -> list[Any]:
        return self._poll_at_most(0.0)

    def _poll_at_most(self, timeout: float) -> list[Any]:
        data = self._data
        if self._epoll is not None:
            try:
                ready = self._epoll.poll(timeout, len(data) or 1)
            except InterruptedError:
                return []
            return [data[fd] for fd, _ in ready if fd in data]
        assert self._sel is not None
        return [data[key.fd] for key, _ in self._sel.select(timeout) if key.fd in data]

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        else:
            assert self._sel is not None
            self._sel.close()


def ended(sock: _HasFileno) -> bool:
    """``sock``'s peer has closed (or reset) the connection, or it is closed here; what
    it sent, read or not, is left as it is (a look, no read)."""
    try:
        fd = sock.fileno()
    except (OSError, ValueError):
        return True
    if fd < 0:
        return True
    look = select.poll()
    look.register(fd, _ENDED)
    try:
        return any(ev & _ENDED for _, ev in look.poll(0))
    except OSError:
        return True


def wanted(*groups: Iterable[Any]) -> bool:
    """Some connection of ``groups`` (channels: ``.sock``) may still read an answer:
    neither closed here nor ended by its peer."""
    try:
        every = [ch for chs in groups for ch in list(chs)]
    except RuntimeError:  # (changed as it was looked at: a thread still reading)
        return True
    return any(not getattr(ch, "closed", False) and not ended(ch.sock) for ch in every)
