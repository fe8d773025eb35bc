"""A bell one thread rings to end another thread's sleep on a connection.

A client's sync call waits for its answer by sleeping on its replica's socket alone
(the latency hot path, client/reactor.py). A second thread of the same program that
meanwhile calls another replica cannot read (the first holds the reading role) and
could not wake the sleeper, so its answer, already there, waited until the first
call's answer came or a heartbeat passed (measured: 0.7 s behind a 3 s call). A
channel given a `Wake` sleeps on its socket and the bell together (one ``poll``, paid
only once the spin window is over and the thread sleeps anyway); the second thread
rings it, and the first goes back to the general loop, which reads every replica.
"""

from __future__ import annotations

import socket

__all__ = ["Wake"]


class Wake:
    """A socketpair: ``ring`` from any thread, the sleeper ``clear``s it."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)

    def fileno(self) -> int:
        return self._r.fileno()

    def ring(self) -> None:
        try:
            self._w.send(b"\0")
        except OSError:
            pass  # full (a ring is already pending) or closed: either way nothing to add

    def clear(self) -> None:
        try:
            while self._r.recv(4096):
                pass
        except OSError:
            pass  # drained (BlockingIOError), or closed

    def close(self) -> None:
        self._r.close()
        self._w.close()
