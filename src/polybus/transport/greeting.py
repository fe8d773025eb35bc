"""Accepted connections in their handshake, each in a thread of its own, for whoever
accepted them (a replica, worker/accepting.py; the registry, registry/service.py) to end
when it stops: a peer that connected and said nothing held its thread (and its socket
open, the peer waiting) for the handshake's timeout after the replica stopped.

Each connection is held here by a duplicate of its descriptor, owned here, to shut it
down with; the socket itself is no use for that, as under TLS it is wrapped and the
wrapper takes its descriptor.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


class Greeting:
    """The handshakes under way: started by `start`, each ended with `done`, and all of
    them cut short by `end`."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name  # each handshake's thread (and the connection's, after)
        self._lock = threading.Lock()
        # duplicate -> its thread, oldest first
        self._under_way: dict[socket.socket, threading.Thread] = {}
        self._cut: set[socket.socket] = set()  # shut down by `cut_oldest`, not yet done
        self._ended = False

    def start(self, sock: socket.socket, handshake: Callable[[socket.socket], None]) -> bool:
        """Run ``handshake(duplicate)`` (``sock``'s, which it gives to `done` when its
        handshake ends, passed or not) in a thread of its own. False, and nothing
        started, once `end` has been called or with no descriptor or thread to spare:
        then ``sock`` is the caller's to close."""
        try:
            waker = sock.dup()
        except OSError:  # (out of descriptors)
            return False
        thread = threading.Thread(target=handshake, args=(waker,), daemon=True,
                                  name=self._thread_name)
        with self._lock:
            # Started under the lock: `end` finds every thread it is given started.
            started = not self._ended
            if started:
                try:
                    thread.start()
                except RuntimeError:  # (no thread to spare)
                    started = False
                else:
                    self._under_way[waker] = thread
        if not started:
            waker.close()
        return started

    def done(self, waker: socket.socket) -> None:
        """The handshake ``waker`` stands for has ended (passed or not)."""
        with self._lock:  # (not while `end` shuts it down: its descriptor is not reused)
            self._under_way.pop(waker, None)
            self._cut.discard(waker)
            waker.close()

    def was_cut(self, waker: socket.socket) -> bool:
        """True if `cut_oldest` cut this handshake short (its failure is no news)."""
        with self._lock:
            return waker in self._cut

    def cut_oldest(self) -> bool:
        """Cut short the oldest handshake under way, whatever its age, that is not cut
        already (its connection shut down: its thread ends at once, as for `end`);
        False if there is none."""
        with self._lock:
            for waker in self._under_way:  # (oldest first)
                if waker not in self._cut:
                    self._cut.add(waker)
                    try:
                        waker.shutdown(socket.SHUT_RDWR)
                    except OSError:  # (the peer went already: it ends anyway)
                        pass
                    return True
        return False

    def end(self, timeout: float) -> None:
        """Shut down the connections in their handshake, which ends each at once (its
        thread closes the connection), and wait up to ``timeout`` seconds, all together,
        for their threads. Handshakes started after are not started at all."""
        with self._lock:
            self._ended = True
            for waker in self._under_way:
                try:
                    waker.shutdown(socket.SHUT_RDWR)
                except OSError:  # (the peer went already)
                    pass
            threads = list(self._under_way.values())
        deadline = time.monotonic() + timeout
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=max(0.0, deadline - time.monotonic()))


def crowded(who: str, refused: int, cut: int, limit: int, where: object) -> str:
    """What a full gate did, for the log once it is below its limit again: how many new
    connections were closed unanswered and how many handshakes under way were cut short,
    the limit, the address, and what to do if clients of the cluster were among them
    (they failed to connect, and may connect again)."""
    did = []
    if refused:
        did.append(f"{refused} new connection{'s were' if refused != 1 else ' was'} "
                   f"closed unanswered")
    if cut:
        did.append(f"{cut} handshake{'s' if cut != 1 else ''} under way "
                   f"{'were' if cut != 1 else 'was'} cut short (the oldest first)")
    return (f"{who}: on {where}, more connections came at once than its limit of "
            f"{limit} handshakes under way: {' and '.join(did)}. Any client of this cluster "
            f"among them failed to connect (the server closed the connection) and may "
            f"try again; if clients keep failing so, something is opening connections "
            f"that do not finish the handshake: find it, and stop it or block it with a "
            f"firewall")
