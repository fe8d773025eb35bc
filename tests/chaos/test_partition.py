"""A replica cut off by the network (not dead: silent) is declared dead by the client's
liveness check, its calls are rerouted, and its answers after the link returns are
discarded. Needs root and `ip netns`; skipped with the reason otherwise.

The cut-off worker runs in a network namespace the test creates, joined to this one by
a veth pair with link-local 169.254.x.y/30 addresses only; the namespace and the pair are
deleted in finally.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.promise import Promise, wait
from polybus.errors import PolybusError
from polybus.registry.service import RegistryService

from . import netns
from .conftest import APP, Harness

HEARTBEAT = 0.5
CUT_S = 10.0
CALLS = 60  # of 50 ms: the near replica still busy with its share when the far is declared dead


_REASON = netns.reason()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(_REASON is not None, reason=f"partition test: {_REASON}")]


def test_a_cut_off_replica_is_declared_dead_and_its_late_answers_dropped(
        harness: Harness) -> None:
    with netns.other_host("pbpart") as host:
        try:
            _run_partition(harness, host.ns, host.ns_if, host.host_ip, host.ns_ip)
        finally:
            harness.close()  # (its processes end before their namespace goes)


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
    netns.ip("-n", ns, "link", "set", ns_if, "down")
    cut_at = time.monotonic()
    # The link comes back after CUT_S whatever the job does (a job that waited for it
    # would answer only then), or as soon as the job has answered without it.
    back = threading.Timer(CUT_S, netns.ip, ("-n", ns, "link", "set", ns_if, "up"))
    back.start()
    try:
        values = wait(promises)  # rerouted to "near" once "far" is declared dead
        answered_at = time.monotonic()
    finally:
        back.cancel()
        back.join()
        netns.ip("-n", ns, "link", "set", ns_if, "up")
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
