"""A peer past the handshake that sends part of a frame and then nothing more, at the
registry (in-process, over tcp and ipc) and at a client (a replica stalled in an
answer). The replica's side: test_stalled_frames.py.

The registry serves each connection on a thread of its own, blocked reading it: such a
peer held that thread and its connection for ever (over tcp its kernel answers the
keepalive probes). With no byte of the frame for 4 of the registry's heartbeats (its
ttl / 3) it is dropped, said in one line, while the registry serves others throughout.

A client already watches each replica that holds its calls by the bytes it receives
(client/liveness.py), whatever they are: a replica stalled in the middle of an answer
is silent, pinged after a heartbeat and taken for dead after three, its calls then
re-run elsewhere or failed. (A replica that holds none of its calls holds nothing of
it but the connection: its next call is watched so.)
"""

from __future__ import annotations

import logging
import socket
import threading
from pathlib import Path

import pytest
from test_stalled_frames import LARGE, PARTS, WAIT, _frames, _until, _write  # tests/unit

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.promise import wait
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import PolybusError
from polybus.registry.service import RegistryService
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import authenticate, connect
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Call,
    Ping,
    Register,
    Registered,
    Replica,
    Replicas,
    Resolve,
    Result,
)
from polybus.worker.poller import ended

TOKEN = b"stalled-registry-token-0123456789"
TTL = 0.75  # (its heartbeat, ttl / 3: 0.25 s; a frame stalled 1 s is dropped)


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "polybus-registry-conn"]


def _resolves(ch: Channel, req: int) -> bool:
    ch.send(Resolve(module="m", req=req))
    got = next_message(ch, WAIT)
    return isinstance(got, Replicas) and got.req == req


@pytest.mark.parametrize("part", list(PARTS))
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_a_peer_stalled_in_a_frame_is_dropped_by_the_registry(
        transport: str, part: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    data, said = PARTS[part]
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"ipc://{tmp_path}/r.sock"
    with RegistryService(TOKEN, where, ttl=TTL) as reg:
        good = connect(str(reg.address), TOKEN, Codec())
        bad = connect(str(reg.address), TOKEN, Codec())
        try:
            assert _resolves(good, 1)
            before = len(_threads())
            bad.send(Register(Replica("r0", "m", "tcp://127.0.0.1:9", ["f"])))
            assert isinstance(next_message(bad, WAIT), Registered)
            _write(bad, data)
            _until(lambda: any(ch.decoder.partial() for ch in list(reg._channels)),
                   lambda: "the frame begun never reached the registry's decoder")
            stalled = next(ch for ch in list(reg._channels) if ch.decoder.partial())
            assert _resolves(good, 2)  # (served meanwhile)
            _until(lambda: stalled not in reg._channels,
                   lambda: f"after {WAIT:g} s the registry still holds the stalled peer's "
                           f"connection ({stalled.peer}: {stalled.decoder.partial()} of a "
                           f"frame received) and its thread ({len(_threads())} connection "
                           f"threads, {before} before it)")
            _until(lambda: len(_threads()) < before,
                   lambda: f"its thread is still there ({len(_threads())} connection "
                           f"threads, {before} before it)")
            _until(lambda: ended(bad.sock), lambda: "its end never saw the connection go")
            assert _resolves(good, 3)
        finally:
            good.close()
            bad.close()
    lines = [r.getMessage() for r in caplog.records if "frame" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"registry: {stalled.peer} {said} and nothing more for "), lines
    assert f"(ttl {TTL:g} s: heartbeat {TTL / 3:g} s)" in lines[0], lines


def test_a_replica_stalled_in_an_answer_is_taken_for_dead_by_its_client() -> None:
    """A replica (here by hand) that sends the first 64 KiB of a 4 MiB answer and
    nothing more: its client pings it, hears nothing, and takes it for dead after three
    heartbeats; the call fails (there is no other replica) rather than waiting for
    ever. That held already; what is new is what is said: that it stopped in the middle
    of a frame, and how far in (it said "sent nothing for 0.75 s")."""
    answer: list[bytes] = []  # (its frame, made once the call's id is known)
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[Channel] = []
    heard: list[object] = []
    written = threading.Event()

    def replica() -> None:
        sock, peer = listener.accept()
        ch = authenticate(sock, peer, TOKEN, Codec(), WAIT)
        held.append(ch)  # (kept open, silent, till the test ends)
        call = next_message(ch, WAIT)
        heard.append(call)
        # (its id is the process's next: not 1 after other tests in the same process)
        if type(call) is Call and (call.iface, call.args) == ("echo", [1]):
            answer.append(_frames(Result(call.id, bytes(LARGE - 200))))
            _write(ch, answer[0][:64 * 1024])
            written.set()
        heard.extend(m for m in [next_message(ch, WAIT)] if m is not None)  # (its Ping)

    server = threading.Thread(target=replica, daemon=True)
    server.start()
    reactor = Reactor(heartbeat=0.25)
    try:
        port = listener.getsockname()[1]
        link = ReplicaLink("w", "server", connect(f"tcp://127.0.0.1:{port}", TOKEN, Codec()))
        reactor.add(link)
        d = Dispatcher("echo", reactor, [link], CallStyle("async", None))  # type: ignore[arg-type]
        reactor.on_lost = d.lost
        reactor.after_step = d.refill
        p = d.call_async((1,), {})
        # (The part is there before the client reads: not a replica silent from the start,
        # as one held up on a loaded machine for three heartbeats was taken for.)
        assert written.wait(WAIT)
        with pytest.raises(PolybusError) as info:
            wait(p, timeout=WAIT)
        assert link.dead
        server.join(WAIT)
    finally:
        reactor.close()
        for ch in held:
            ch.close()
        listener.close()
    assert isinstance(heard[-1], Ping), heard  # (it was asked, and never answered)
    # (said as what it is: not "sent nothing"; and where: the replica's host, cut off)
    assert f"w at tcp://127.0.0.1:{port} sent 65,536 of a {len(answer[0]):,}-byte frame and nothing more for 0.75 s " \
           "while holding calls (heartbeat 0.25 s); taken for dead" in str(info.value), info.value
