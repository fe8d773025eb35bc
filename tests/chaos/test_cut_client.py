"""A client cut off by the network (not closed: no FIN, no reset) while it has calls
queued at a replica: the replica finds it within the bound its heartbeat gives
(transport/keepalive.py) and drops it with the calls not yet run, and serves others on
once the link is back. One cut off while idle, its connection silent, is ended by the
kernel's probes within the same bound, and dropped too. Needs root and `ip netns`;
skipped with the reason otherwise.

The client runs in a network namespace the test creates, joined to this one by a veth
pair with link-local 169.254.x.y/30 addresses only (netns.py); the replica and the
registry listen on this end. The namespace and the pair are deleted in finally, after
the processes are ended.
"""

from __future__ import annotations

import select
import subprocess
import sys
import time

import pytest

from polybus.client.promise import wait
from polybus.registry.service import RegistryService
from polybus.transport import keepalive
from polybus.transport.keepalive import bound_s, idle_bound_s
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

from . import netns
from .conftest import APP, Harness

HEARTBEAT = 0.5
CALLS = 100  # of 100 ms each (doomed_client.py): 10 s of work queued at the replica
SAID = "taken for cut off by the network"

_REASON = netns.reason()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(_REASON is not None, reason=f"cut client test: {_REASON}")]


def _line(proc: subprocess.Popen[bytes], limit: float) -> bytes:
    """The next line ``proc`` prints on stdout within ``limit`` seconds, or b""."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], limit)
    return proc.stdout.readline() if ready else b""


# A client that connects and says nothing more (its connection idle both ways).
IDLE = """
import sys, time
from polybus.token import read_token
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
ch = connect(sys.argv[1], read_token() or b"", Codec())
print("connected", flush=True)
time.sleep(600)
"""


def _runs(harness: Harness) -> int:
    return sum(harness.executions().values())


def test_a_client_cut_off_is_dropped_with_its_queued_calls(harness: Harness) -> None:
    with netns.other_host("pbcut") as host:
        try:
            _run_cut(harness, host)
        finally:
            harness.close()  # (its processes end before their namespace goes)


def _run_cut(harness: Harness, host: netns.Host) -> None:
    harness.service = RegistryService(harness.token, f"tcp://{host.host_ip}:0", ttl=60.0)
    harness.registry = f"{host.host_ip}:{harness.service.address.port}"
    harness.start("w", [sys.executable, "-m", "polybus", "worker", "--registry",
                        harness.registry, "--config", str(APP), "--as", "server", "--name",
                        "w", "--exit-with-parent", "--heartbeat", str(HEARTBEAT),
                        "--listen", f"tcp://{host.host_ip}:0"])
    harness.wait_registered(["w"])
    doomed = harness.start("doomed", host.exec(
        sys.executable, str(APP.parent / "doomed_client.py"), harness.registry, str(CALLS)))
    assert _line(doomed, 30) == b"sent\n", harness.stderr("doomed")
    deadline = time.monotonic() + 10
    while _runs(harness) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _runs(harness) >= 3, harness.stderr("w")

    host.link("down")  # (the client's end of the pair: its process lives on, silent)
    cut_at = time.monotonic()
    bound = bound_s(HEARTBEAT)
    # Its calls stop running: the last run seen, then, once the replica has said it
    # dropped the client, none for five calls' time.
    ran, seen_at, stopped_at = _runs(harness), cut_at, None
    while time.monotonic() < cut_at + bound + 5:
        time.sleep(0.05)
        if (now := _runs(harness)) != ran:
            ran, seen_at = now, time.monotonic()
        elif time.monotonic() - seen_at >= 0.5 and SAID in harness.stderr("w"):
            stopped_at = seen_at
            break
    assert stopped_at is not None, f"its calls ran on: {ran} of {CALLS} so far"
    # After the last thing heard from it (its acknowledgement of the answer before the
    # cut), within the bound and a look's delay: every half heartbeat, or after a poll
    # under way (up to a second, worker/polling.py).
    assert stopped_at - cut_at <= bound + 2.0, stopped_at - cut_at
    assert ran < CALLS
    assert SAID in harness.stderr("w"), harness.stderr("w")
    assert doomed.poll() is None  # (alive all along: cut off, not gone)

    host.link("up")
    session = harness.session(harness.app(f"cluster.heartbeat={HEARTBEAT}",
                                          "modules.client.use.square.callstyle=sync"))
    assert wait(session.call("square", (12, 0), {})) == 144
    assert _runs(harness) == ran + 1
    assert harness.procs["w"].poll() is None


def test_an_idle_client_cut_off_is_dropped_by_the_probes(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # One probe unanswered ends it, not nine (the replica runs in this process): the
    # bound is 2 s, not 10, to wait out twice; on this pair of ends no probe is lost.
    monkeypatch.setattr(keepalive, "IDLE_PROBES", 1)
    assert idle_bound_s(HEARTBEAT) == 2
    with netns.other_host("pbidle") as host:
        rt = WorkerRuntime("w", {"f": lambda x: x}, harness.token,
                           f"tcp://{host.host_ip}:0", ServeOptions(heartbeat=HEARTBEAT))
        rt.start()
        try:
            idle = harness.start("idle", host.exec(sys.executable, "-c", IDLE,
                                                   str(rt.address)))
            assert _line(idle, 30) == b"connected\n", harness.stderr("idle")
            deadline = time.monotonic() + 5
            while not rt._channels and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(rt._channels) == 1
            time.sleep(idle_bound_s(HEARTBEAT) + 1)  # (probed and answered: kept)
            assert len(rt._channels) == 1
            host.link("down")
            cut_at = time.monotonic()
            while rt._channels and time.monotonic() < cut_at + idle_bound_s(HEARTBEAT) + 5:
                time.sleep(0.05)
            assert not rt._channels, "the idle client cut off was kept"
            assert time.monotonic() - cut_at <= idle_bound_s(HEARTBEAT) + 2.0
            assert idle.poll() is None
        finally:
            harness.close()
            rt.stop(grace=0.5)
