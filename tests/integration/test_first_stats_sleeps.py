"""A replica taken back is asked its counters on the connection just dialled
(client/stats.py `first_stats`), for a bounded while. One that never answers leaves the
asking thread asleep in the kernel (`Channel.wait_readable`), not polling: a polling
wait burns a CPU for the whole bound, on a thread of the client program. The check is
of behaviour (a spin uses most of a CPU over the wait, a sleep next to none), with a
bound far from both. And an answer that comes while it sleeps wakes it.

Fake peers on 127.0.0.1 (and ipc/shm socket files in the test's directory): a listener
that authenticates the connection, then reads and says nothing back (or answers once the
asker is in its wait).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from polybus.client.stats import first_stats
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, authenticate, connect, listen
from polybus.wire.codec import Codec
from polybus.wire.messages import Stats, StatsRequest

TOKEN = b"first-stats-token-0123456789abcdef"
SCHEMES = ["tcp", "ipc", "shm", "inproc"]


@contextmanager
def _peer(scheme: str, directory: Path,
          act: Callable[[Channel], None]) -> Iterator[Channel]:
    """A client channel to a peer that runs ``act`` on its side of the connection (in a
    thread), then keeps it open until the test is done."""
    where = Address.parse("tcp://127.0.0.1:0" if scheme == "tcp"
                          else f"{scheme}://{directory / f'peer.{scheme}'}")
    listener, real = listen(where)
    done = threading.Event()
    served: list[Channel] = []

    def serve() -> None:
        sock, who = listener.accept()
        ch = authenticate(sock, who, TOKEN, Codec(), shm=scheme == "shm")
        served.append(ch)
        act(ch)
        done.wait(30)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    client = connect(real, TOKEN, Codec())
    try:
        yield client
    finally:
        done.set()
        server.join(10)
        client.close()
        for ch in served:
            ch.close()
        listener.close()


def _read_the_request(ch: Channel) -> None:
    assert isinstance(next_message(ch, limit=10.0), StatsRequest)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_replica_that_never_answers_leaves_the_asker_asleep(
        tmp_path: Path, scheme: str) -> None:
    with _peer(scheme, tmp_path, _read_the_request) as ch:
        wall0, cpu0 = time.monotonic(), time.thread_time()
        got = first_stats(ch, seconds=1.0)
        cpu, wall = time.thread_time() - cpu0, time.monotonic() - wall0
    assert got is None
    assert wall >= 1.0  # (it waited its whole bound: no answer came)
    # A polling wait keeps this thread on a CPU for most of the second (all of it on
    # an idle machine); a sleeping one uses a few ms.
    assert cpu < wall / 4, f"the wait used {cpu:.2f} s of CPU in {wall:.2f} s"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_answer_that_comes_during_the_wait_wakes_the_asker(
        tmp_path: Path, scheme: str) -> None:
    waiting = threading.Event()

    def answer(ch: Channel) -> None:
        req = next_message(ch, limit=10.0)
        # (answered once the asker is in its wait, or about to be; else never: the
        # asker's check fails, not this thread)
        if isinstance(req, StatsRequest) and waiting.wait(10):
            ch.send(Stats("w0", 7, 1.5, 0.25, 0, 0, handlers=2, req=req.req))

    with _peer(scheme, tmp_path, answer) as ch:
        wait = ch.wait_readable

        def wait_readable(seconds: float) -> bool:
            waiting.set()
            return wait(seconds)

        ch.wait_readable = wait_readable  # type: ignore[method-assign]
        got = first_stats(ch, seconds=20.0)
    assert got is not None and (got.calls, got.busy_s, got.handlers) == (7, 1.5, 2)
