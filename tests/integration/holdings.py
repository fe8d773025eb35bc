"""What a worker started by hand holds for its clients, seen from outside (/proc: its
descriptors by kind, its threads) and from inside (apps/mix/mixprobe.py, under
``$MIX_PROBE``: its client connections, queued and held calls, forwarding's tables, kept
values, cached operands), and how two such samples compare (chaosreg.py: after a run
that ended well, and after a client was killed and the next run)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen

SETTLE_S = 3.0  # for a worker's descriptors and threads to come back

Workers = list[tuple[str, "Popen[bytes]", Path]]


def fds(pid: int) -> dict[str, list[str]]:
    """The process's descriptors by kind (``socket``, ``memfd``, ``other``): their links."""
    out: dict[str, list[str]] = {"socket": [], "memfd": [], "other": []}
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                out["socket" if link.startswith("socket:") else "memfd" if
                    link.startswith("/memfd:") else "other"].append(link)
    return out


def tcp_ports(pids: list[int]) -> set[int]:
    """The local ports of the tcp sockets of processes ``pids`` (/proc/net/tcp*)."""
    inodes = {link[8:-1] for pid in pids for link in fds(pid)["socket"]}
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for row in list(f)[1:]:
                w = row.split()
                if len(w) > 9 and w[9] in inodes:
                    ports.add(int(w[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class Holding:
    """What a worker holds, from outside (/proc) and inside (apps/mix/mixprobe.py)."""

    sockets: int
    memfds: int
    other: int  # descriptors of every other kind
    threads: int
    peer_in: int  # connections from the other workers (forwarded values)
    peers_out: int  # connections to them
    client_in: int  # connections from clients
    probe: dict[str, object]


def holding(workers: Workers, work: Path) -> dict[str, Holding]:
    """Each worker's `Holding`, by its name."""
    pids = [p.pid for _, p, _ in workers]
    ports = tcp_ports(pids)
    out = {}
    for what, p, _ in workers:
        probe = probe_of(work, p.pid)
        ends = probe.get("ends")
        ends = ends if isinstance(ends, list) else []
        peer_in = sum(1 for k, v in ends if (k == "tcp" and v in ports)
                      or (k == "unix" and v in pids))
        kinds = fds(p.pid)
        try:
            threads = len(os.listdir(f"/proc/{p.pid}/task"))
        except OSError:
            threads = -1
        out[what] = Holding(len(kinds["socket"]), len(kinds["memfd"]), len(kinds["other"]), threads,
                            peer_in, int(probe.get("peers_out", 0)),  # type: ignore[call-overload]
                            len(ends) - peer_in, probe)
    return out


def more(now: Holding, was: Holding) -> dict[str, str]:
    """What ``now`` holds more than ``was``, beside the connections between workers (one
    each way per pair that forwarded a value: kept) and what may stay (MAY_STAY)."""
    out = {}
    peers = now.peer_in + now.peers_out - was.peer_in - was.peers_out
    for k, a, b in [("descriptors (not sockets, not memfds)", now.other, was.other),
                    ("threads", now.threads, was.threads),
                    ("client connections", now.client_in, was.client_in),
                    ("sockets beside the workers' connections",
                     now.sockets - now.peer_in - now.peers_out,
                     was.sockets - was.peer_in - was.peers_out),
                    ("memfds", now.memfds, was.memfds + 4 * max(0, peers))]:
        if a > b:
            out[k] = f"{b} -> {a}"
    for k, v in now.probe.items():
        w = was.probe.get(k)
        if k not in MAY_STAY | {"ends", "channels", "peers_out"} and (
                not isinstance(v, int) or not isinstance(w, int) or v > w):
            out[k] = f"{w} -> {v}"
    return out


# What a replica holds for clients that are gone may stay (reliability.md, "The client
# dies"): the values forwarded to it for a client that may dial again (a run at a shared
# registry) wait 5 minutes for it, and those of a client none of whose calls naming them
# it read wait for the bound on unclaimed values; every other count comes back.
MAY_STAY = {"arrived", "arrived_bytes", "arrived_unlapsed", "lapsed"}


def probe_of(work: Path, pid: int) -> dict[str, object]:
    """What the worker ``pid`` holds for its clients (apps/mix/mixprobe.py), {} if it
    wrote nothing."""
    try:
        return dict(json.loads((work / f"probe.{pid}").read_text()))
    except (OSError, ValueError):
        return {}


def held_back(workers: Callable[[], Workers], work: Path, base: dict[str, Holding]
              ) -> list[str]:
    """Each worker that holds more than ``base`` (`more`) after SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now = holding(workers(), work)
        over = [f"{what} holds more than after a run that ended well: {diff}"
                for what, h in now.items() if (diff := more(h, base[what]))]
        if not over or time.monotonic() > deadline:
            return over
        time.sleep(0.1)
