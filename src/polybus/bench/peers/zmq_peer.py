"""pyzmq peer: REQ/REP round trips and one-way bandwidth, as pyzmq's docs show them.

A REP server child (bound to 127.0.0.1 only) echoes each message for latency; for
bandwidth the REQ side sends the array zero-copy (``copy=False``) and the server answers
with one byte. The client is this process; placement as for the raw socket peer.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from polybus.bench.peers import PeerUnavailable, why_unavailable
from polybus.bench.peers._proc import PYTHON, python_child_env, reap, spawn
from polybus.bench.placement import DEFAULT, Placement, cpu_sets, pinned_self
from polybus.bench.stats import Stat, repeat

__all__ = ["ZmqPeer"]


def _serve_main() -> None:
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    while True:
        frame = sock.recv(copy=False)
        if len(frame) == 1 and frame.bytes == b"Q":
            sock.send(b"")
            break
        if frame.bytes[:1] == b"S":  # sink: acknowledge with one byte
            sock.send(b"\x01")
        else:
            sock.send(frame, copy=False)
    sock.close(linger=0)
    ctx.term()


class ZmqPeer:
    """A REQ client here, a REP server child; use as a context manager."""

    def __init__(self, placement: Placement = DEFAULT) -> None:
        why = why_unavailable("pyzmq")
        if why:
            raise PeerUnavailable(why)
        self._cpus = cpu_sets(placement)
        self._proc: Any = None
        self._ctx: Any = None
        self._sock: Any = None

    def __enter__(self) -> ZmqPeer:
        import zmq

        argv = [PYTHON, "-c", "from polybus.bench.peers.zmq_peer import _serve_main; "
                "_serve_main()"]
        with pinned_self(self._cpus[1] if self._cpus else None):
            self._proc = spawn(argv, env=python_child_env())
        try:
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline().decode().strip()
            if not line:
                raise PeerUnavailable("pyzmq REP server did not start")
            self._ctx = zmq.Context()
            self._sock = self._ctx.socket(zmq.REQ)
            self._sock.setsockopt(zmq.RCVTIMEO, 60_000)
            self._sock.connect(f"tcp://127.0.0.1:{line}")
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        try:
            if self._sock is not None:
                try:
                    self._sock.send(b"Q")
                    self._sock.recv()
                except Exception:  # the server is reaped (terminated) below anyway
                    pass
                self._sock.close(linger=0)
                self._ctx.term()
                self._sock = None
        finally:
            if self._proc is not None:
                reap(self._proc)
                self._proc = None

    def rtt_us(self, size: int, reps: int, iters: int) -> Stat:
        """REQ/REP round trip of a ``size``-byte message, µs (mean of ``iters``)."""
        sock = self._sock
        msg = b"E" + bytes(max(size - 1, 0)) if size else b""
        with pinned_self(self._cpus[0] if self._cpus else None):
            def once() -> float:
                t0 = time.perf_counter()
                for _ in range(iters):
                    sock.send(msg, copy=size < 65536)
                    sock.recv(copy=size < 65536)
                return (time.perf_counter() - t0) / iters * 1e6
            return repeat(once, reps, warmup=1)

    def bandwidth_gbps(self, size: int, reps: int) -> Stat:
        """One-way zero-copy send of a ``size``-byte array, one-byte answer, GB/s."""
        sock = self._sock
        data = np.full(size, 7, dtype=np.uint8)
        data[0] = ord("S")
        with pinned_self(self._cpus[0] if self._cpus else None):
            def once() -> float:
                t0 = time.perf_counter()
                sock.send(data, copy=False)
                sock.recv()
                return size / (time.perf_counter() - t0) / 1e9
            return repeat(once, reps, warmup=1)
