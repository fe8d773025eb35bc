"""A replica cut off by the network (not dead: silent) is declared dead by the client's
liveness check, its calls are rerouted, and its answers after the link returns are
discarded. Needs root and `ip netns`; skipped with the reason otherwise.

The cut-off worker runs in a network namespace the test creates, joined to this one by
a veth pair with link-local 169.254.x.y/30 addresses only; the namespace and the pair are
deleted in finally.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.promise import Promise, wait
from polybus.errors import PolybusError
from polybus.registry.service import RegistryService

from .conftest import APP, Harness

HEARTBEAT = 0.5
CUT_S = 10.0
CALLS = 120


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


def _netns_reason() -> str | None:
    if shutil.which("ip") is None:
        return "needs the ip command (iproute2)"
    if os.geteuid() != 0:
        return "needs root to create a network namespace"
    probe = f"pbprobe{secrets.token_hex(3)}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


_REASON = _netns_reason()
pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(_REASON is not None, reason=f"partition test: {_REASON}")]


def test_a_cut_off_replica_is_declared_dead_and_its_late_answers_dropped(
        harness: Harness) -> None:
    tag = secrets.token_hex(3)
    ns, host_if, ns_if = f"pbpart{tag}", f"pbva{tag}", f"pbvb{tag}"
    octet = 100 + secrets.randbelow(100)
    host_ip, ns_ip = f"169.254.{octet}.1", f"169.254.{octet}.2"
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", ns, "addr", "add", f"{ns_ip}/30", "dev", ns_if)
        _ip("-n", ns, "link", "set", ns_if, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _run_partition(harness, ns, ns_if, host_ip, ns_ip)
    finally:
        _ip("netns", "del", ns, check=False)       # takes its end of the pair along
        _ip("link", "del", host_if, check=False)   # in case the move never happened


def _run_partition(harness: Harness, ns: str, ns_if: str, host_ip: str, ns_ip: str) -> None:
    # The registry listens on the host end of the pair, which both workers can reach.
    harness.service = RegistryService(harness.token, f"tcp://{host_ip}:0", ttl=60.0)
    harness.registry = f"{host_ip}:{harness.service.address.port}"
    app = harness.app(f"cluster.heartbeat={HEARTBEAT}",
                      "modules.client.use.square.callstyle=async-demand(4)")
    harness.worker("near")
    harness.start("far", ["ip", "netns", "exec", ns, sys.executable, "-m", "polybus",
                          "worker", "--registry", harness.registry, "--config", str(APP),
                          "--as", "server", "--name", "far", "--exit-with-parent",
                          "--heartbeat", "0.5", "--listen", f"tcp://{ns_ip}:0"])
    harness.wait_registered(["near", "far"])
    session = harness.session(app)
    far = next(lk for links in session.links.values() for lk in links if lk.name == "far")

    lost: list[tuple[str, float, str]] = []
    inner = session.reactor.on_lost

    def on_lost(link: ReplicaLink, error: PolybusError) -> None:
        lost.append((link.name, time.monotonic(), str(error)))
        inner(link, error)

    session.reactor.on_lost = on_lost

    # Each call takes 50 ms; both replicas get work. Cut once "far" holds calls.
    promises: list[Promise] = [session.call("square", (i, 50), {}) for i in range(CALLS)]
    deadline = time.monotonic() + 10
    while not (far.outstanding and far.calls >= 2) and time.monotonic() < deadline:
        session.reactor.step(timeout=0.05)
    assert far.outstanding, "the far replica never held calls"
    _ip("-n", ns, "link", "set", ns_if, "down")
    cut_at = time.monotonic()
    try:
        values = wait(promises)  # rerouted to "near" once "far" is declared dead
        answered_at = time.monotonic()
    finally:
        left = CUT_S - (time.monotonic() - cut_at)
        if left > 0:
            time.sleep(left)
        _ip("-n", ns, "link", "set", ns_if, "up")
    assert values == [i * i for i in range(CALLS)]
    assert [name for name, _, _ in lost] == ["far"], lost
    # Declared dead within the bound: silence is checked every half heartbeat and the
    # verdict comes after three heartbeats of it (+ one interval of check resolution).
    declared = lost[0][1] - cut_at
    assert declared <= 4 * HEARTBEAT + 1.0, (declared, lost)
    assert answered_at - cut_at < CUT_S, "the job waited for the link to come back"
    assert "taken for dead" in lost[0][2]

    # The link is back: whatever "far" still sends is never read. Nothing changes.
    calls_before = far.calls
    snapshot = [p.__polybus_value__() for p in promises]
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        session.reactor.poll()
        time.sleep(0.05)
    assert far.dead and far.calls == calls_before
    assert [p.__polybus_value__() for p in promises] == snapshot
    # Exactly once at the client: one answer per call, each right.
    assert sum(lk.calls for links in session.links.values() for lk in links) == CALLS
