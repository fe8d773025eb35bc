"""A consumer's replica cut off by the network (not closed: no FIN, no reset) while the
link a producer's replica dialled to send it values is idle: the producer's kernel
probes the link and ends it within the bound its heartbeat gives
(transport/keepalive.py), and the next value is not written into it, to be retransmitted
for minutes, but said undelivered at once, naming the peer. Needs root and `ip netns`;
skipped with the reason otherwise.

The consumer's replica runs in a network namespace the test creates, joined to this one
by a veth pair with link-local 169.254.x.y/30 addresses only (netns.py); the producer's
replica runs in this process. Without the probes on the dialling side the link was
still taken for open 30 s after the cut, and the next value "went".
"""

from __future__ import annotations

import select
import socket
import sys
import time

import pytest

from polybus.transport import keepalive
from polybus.transport.keepalive import idle_bound_s
from polybus.wire.messages import Deliver
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

from . import netns
from .conftest import Harness

HEARTBEAT = 0.5
_REASON = netns.reason()
pytestmark = [pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(_REASON is not None, reason=f"cut peer test: {_REASON}")]

# A replica that serves until it is ended, saying where.
CONSUMER = """
import sys, time
from polybus.token import read_token
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime
rt = WorkerRuntime("consumer", {}, read_token() or b"", f"tcp://{sys.argv[1]}:0",
                   options=ServeOptions(heartbeat=float(sys.argv[2]))).start()
print(rt.address, flush=True)
time.sleep(600)
"""


def _ended(sock: socket.socket) -> bool:
    """Whether the kernel has ended ``sock``'s connection (an error, or readable: the
    peer never sends on this link)."""
    return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                or select.select([sock], [], [], 0)[0])


def test_a_replica_s_idle_link_to_a_peer_cut_off_is_ended_by_its_probes(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # One probe unanswered ends it, not nine (the producer runs in this process): the
    # bound is 2 s, not 10, to wait out twice; on this pair of ends no probe is lost.
    monkeypatch.setattr(keepalive, "IDLE_PROBES", 1)
    assert idle_bound_s(HEARTBEAT) == 2
    with netns.other_host("pbpeer") as host:
        producer = WorkerRuntime("producer", {}, harness.token, f"tcp://{host.host_ip}:0",
                                 ServeOptions(heartbeat=HEARTBEAT)).start()
        try:
            consumer = harness.start("consumer", host.exec(
                sys.executable, "-c", CONSUMER, host.ns_ip, str(HEARTBEAT)))
            assert consumer.stdout is not None
            ready, _, _ = select.select([consumer.stdout], [], [], 30)
            to = consumer.stdout.readline().decode().strip() if ready else ""
            assert to.startswith("tcp://"), harness.stderr("consumer")
            assert producer.forwarding._send(to, Deliver("first", True, 1))
            link = producer.forwarding._peers[to]
            time.sleep(idle_bound_s(HEARTBEAT) + 1)  # (probed and answered: kept)
            assert not _ended(link.sock)

            host.link("down")  # (the consumer's end of the pair: its process lives on)
            cut_at = time.monotonic()
            while not _ended(link.sock) and time.monotonic() < cut_at + idle_bound_s(HEARTBEAT) + 5:
                time.sleep(0.05)
            assert _ended(link.sock), "the idle link to the peer cut off was kept"
            assert time.monotonic() - cut_at <= idle_bound_s(HEARTBEAT) + 2.0
            # The next value is not written into the dead link: it fails at once (its
            # client is told, Undelivered) and the link is let go, to be dialled again.
            assert not producer.forwarding._send(to, Deliver("second", True, 2))
            assert to not in producer.forwarding._peers
            assert consumer.poll() is None  # (alive all along: cut off, not gone)
        finally:
            harness.close()  # (its processes end before their namespace goes)
            producer.stop(grace=0.5)
