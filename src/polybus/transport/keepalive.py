"""Finding a TCP peer cut off by the network: its host gone, a cable pulled, a partition.

No FIN and no reset ever comes from such a peer, so a socket cannot tell it from a peer
that is quiet: a replica's queued calls for a client cut off would run for nobody, its
answers sit unacknowledged, and the connection (its queue, its places) live on for as
long as the kernel retransmits (~15 min), or for ever if nothing is written. Two
things, both measured from the last thing heard from the peer (a byte, or an ACK):

- `keep_alive`: the kernel probes a connection silent for one heartbeat (rounded up to
  whole seconds, its unit), every heartbeat after that, and ends it after
  ``IDLE_PROBES`` probes unanswered, so ``idle_bound_s`` after the last thing heard.
  The peer's kernel answers the probes, whatever its process is doing: an idle client,
  or one waiting for a long call, is never taken for gone. A probe is never sent again
  (unlike data), so on a link that loses packets a few in a row can go unanswered
  though the peer is there: at 5% loss each way, 3 in a row would end a live idle
  connection about once in 18 minutes, 9 in a row once in decades. An idle client cut
  off costs its replica nothing but the connection, so it is given the longer bound.
- `unheard_s`: for what the kernel does not probe, data written and not acknowledged
  (the answers of a client's queued calls): how long the peer has acknowledged
  nothing while such data waits. Its owner ends the connection past ``bound_s``.
  (``TCP_USER_TIMEOUT`` would do this in the kernel, but it also ends a connection
  whose peer is alive and has not read for that long, its receive window closed:
  a client that computes before it reads its answers. Here a closed window, whose
  data waits unsent rather than unacknowledged, is never counted.)

Linux only (``TCP_KEEPIDLE``, ``TCP_INFO``): elsewhere the probes are the system's
defaults if it has SO_KEEPALIVE, and `unheard_s` says 0.
"""

from __future__ import annotations

import math
import socket
import struct

__all__ = ["IDLE_PROBES", "PROBES", "bound_s", "cut", "idle_bound_s", "keep_alive",
           "probe_s", "unheard_s"]

PROBES = 3  # heartbeats unacknowledged before a peer holding data is gone (the client's pings')
IDLE_PROBES = 9  # keepalive probes unanswered before a silent peer is taken for gone
_MAX_S = 32767  # the most TCP_KEEPIDLE and TCP_KEEPINTVL take (seconds)

# struct tcp_info's head (linux/tcp.h): 8 bytes, then 13 32-bit fields, of which
# unacked (5th) and last_ack_recv (13th, ms); retransmits is the 3rd byte.
_INFO = struct.Struct("8B13I")
_TCP_INFO = getattr(socket, "TCP_INFO", None)
_LINGER_NOT = struct.pack("ii", 1, 0)  # close at once: a reset, the data unsent dropped


def probe_s(heartbeat: float) -> int:
    """The probes' interval (and the silence before the first): ``heartbeat`` rounded
    up to whole seconds, the kernel's unit, within what it takes."""
    return max(1, min(_MAX_S, math.ceil(heartbeat)))


def bound_s(heartbeat: float) -> int:
    """How long after the last thing heard from it a peer cut off with data written to it
    unacknowledged (`unheard_s`) is taken for gone."""
    return (PROBES + 1) * probe_s(heartbeat)


def idle_bound_s(heartbeat: float) -> int:
    """How long after the last thing heard from it a silent peer cut off is ended by the
    kernel's probes (`keep_alive`)."""
    return (IDLE_PROBES + 1) * probe_s(heartbeat)


def _tcp(sock: socket.socket) -> bool:
    return sock.family in (socket.AF_INET, socket.AF_INET6)


def keep_alive(sock: socket.socket, heartbeat: float) -> None:
    """Have the kernel probe ``sock``'s peer when silent (see the module's text); a
    Unix socket, whose peer the kernel always knows, is left as it is."""
    if not _tcp(sock):
        return
    every = probe_s(heartbeat)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", every), ("TCP_KEEPINTVL", every),
                            ("TCP_KEEPCNT", IDLE_PROBES)):
            opt = getattr(socket, name, None)
            if opt is not None:
                sock.setsockopt(socket.IPPROTO_TCP, opt, value)
    except OSError:  # (closed meanwhile: whoever uses it next finds so)
        pass


def unheard_s(sock: socket.socket) -> float:
    """Seconds since ``sock``'s peer last acknowledged anything, while data written to it
    waits for its acknowledgement and has been sent again (so the peer has had time to
    answer); 0.0 otherwise, for a Unix socket, or where the system does not say. A
    healthy peer acknowledges within a round trip, and, the connection silent, answers
    `keep_alive`'s probes every `probe_s`, so this stays below that unless the peer is
    cut off."""
    if _TCP_INFO is None or not _tcp(sock):
        return 0.0
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO.size)
    except OSError:
        return 0.0
    if len(raw) < _INFO.size:
        return 0.0
    info = _INFO.unpack(raw)
    retransmits, unacked, last_ack_ms = int(info[2]), int(info[8 + 4]), int(info[8 + 12])
    if not unacked or not retransmits:
        return 0.0
    return last_ack_ms / 1000.0


def cut(sock: socket.socket) -> None:
    """End ``sock``'s connection to a peer taken for cut off, from any thread: whoever
    reads it finds it ended (and one writing to it, broken), and closing it frees it at
    once rather than leaving the kernel to retransmit what the peer never took. (A TLS
    socket is shut down beneath its TLS, which has no peer left to say goodbye to.)"""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NOT)
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # (closed meanwhile, or ended by its peer already)
        pass
