"""Client module of the call-path benchmarks: each entrypoint times its own loop.

The client thread pins itself to the CPUs it is given (the workers inherited theirs
from the bench process when they were started), so polybus is measured at the same
placement as the raw socket peers. Every entrypoint returns plain lists of figures
and the socket family the calls went over (to tell tcp from ipc honestly).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import numpy as np

from polybus import use, wait
from polybus.pinning import pinned_thread

echo = use("echo")
sink = use("sink")
noop = use("noop")


def _family() -> str:
    from polybus.client.stubs import current
    from polybus.transport.shm import ShmChannel

    channels = [link.channel for links in current().links.values() for link in links]
    if channels and all(isinstance(ch, ShmChannel) for ch in channels):
        return "shm"
    families = {ch.sock.family for ch in channels}
    return "unix" if families == {socket.AF_UNIX} else "tcp"




def warm_for(round_trip: Any, seconds: float) -> int:
    """Untimed round trips, one at least, until ``seconds`` have passed (b_latency's
    WARMUP_S: a cluster just started is still settling); how many were made."""
    made, end = 0, time.perf_counter() + seconds
    while made == 0 or time.perf_counter() < end:
        round_trip()
        made += 1
    return made


def latency(sizes: list[int], reps: int, iters: list[int], warmup_s: float = 0.0,
            cpus: list[int] | None = None) -> dict[str, Any]:
    """Mean round trip (µs) of a sync echo of ``size`` bytes, ``reps`` times per size,
    after ``warmup_s`` seconds of untimed empty echoes before the first size."""
    out: dict[str, Any] = {"family": "", "rtt_us": []}
    with pinned_thread(set(cpus) if cpus else None):
        warm_for(lambda: echo(b""), warmup_s)  # connect and warm before any clock runs
        out["family"] = _family()
        for size, n in zip(sizes, iters, strict=True):
            payload = b"\x07" * size
            per_rep = []
            for r in range(reps + 1):  # repetition 0 is an untimed warm-up
                t0 = time.perf_counter()
                for _ in range(n):
                    echo(payload)
                if r:
                    per_rep.append((time.perf_counter() - t0) / n * 1e6)
            out["rtt_us"].append(per_rep)
    return out


def bandwidth(sizes: list[int], reps: int, cpus: list[int] | None = None) -> dict[str, Any]:
    """GB/s of one-way transfers of a ``size``-byte uint8 array (the answer is its size)."""
    out: dict[str, Any] = {"family": "", "gbps": []}
    with pinned_thread(set(cpus) if cpus else None):
        sink(np.zeros(1, dtype=np.uint8))
        out["family"] = _family()
        for size in sizes:
            array = np.full(size, 7, dtype=np.uint8)
            per_rep = []
            for r in range(reps + 1):
                t0 = time.perf_counter()
                got = sink(array)
                dt = time.perf_counter() - t0
                if int(got) != size:
                    raise AssertionError(f"sink saw {got} bytes of {size}")
                if r:
                    per_rep.append(size / dt / 1e9)
            out["gbps"].append(per_rep)
    return out


def throughput(calls: int, reps: int, payload: int = 0, lone: int = 0) -> dict[str, Any]:
    """Calls per second of ``noop``, every call sent before any answer is waited for;
    each call carries (and gets back) ``payload`` bytes, or a small int if 0. With
    ``lone``, also the mean µs of ``lone`` calls made one at a time, each waited for
    before the next (one call in flight: what aggregation adds to latency)."""
    rates: list[float] = []
    lone_us: list[float] = []
    data = b"\x07" * payload
    for r in range(reps + 1):
        args = [data] * calls if payload else range(calls)
        t0 = time.perf_counter()
        promises = [noop(a) for a in args]
        for p in promises:
            wait(p)
        if r:
            rates.append(calls / (time.perf_counter() - t0))
    for r in range(reps + 1 if lone else 0):
        t0 = time.perf_counter()
        for _ in range(lone):
            wait(noop(data))
        if r:
            lone_us.append((time.perf_counter() - t0) / lone * 1e6)
    return {"family": _family(), "calls_per_s": rates, "one_in_flight_us": lone_us}
