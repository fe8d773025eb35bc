"""A client that stops reading its answers stalls no one, and loses nothing.

Every thread of a replica that writes to clients is shared by all of them. A blocking
write to a client that had stopped reading stopped that thread, and so the replica:
with its one pool thread blocked on that client's full socket (or ring), another
client's call was never answered. Now a replica never waits for a client to read
(worker/unread.py): the answers wait for that client, who is read no more until it
catches up, and then gets every one of them.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from polybus.testing.peers import next_message
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Message, Ping, Pong, Result
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"unread-answers-token-0123456789abcdef"
N = 120  # answers of SIZE bytes: far more than a socket's buffers or a ring hold
SIZE = 200_000  # (under shm's segment threshold: these fill the ring itself)


def blob(i: int) -> bytes:
    return i.to_bytes(4, "big") * (SIZE // 4)


def echo(x: object) -> object:
    return x


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_client_not_reading_stalls_no_one_and_gets_every_answer(
        transport: str, tmp_path: Path) -> None:
    where = "tcp://127.0.0.1:0" if transport == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"blob": blob, "echo": echo}, TOKEN, where).start()
    slow = connect(rt.address, TOKEN, Codec())
    good = connect(rt.address, TOKEN, Codec())
    try:
        for i in range(N):  # sent, and not one answer read
            slow.send(Call(i, "blob", [i]))
        slow.send(Ping(7))
        for k in range(3):  # the replica answers others meanwhile, at once
            good.send(Call(1000 + k, "echo", [k]))
            assert next_message(good, 10.0) == Result(1000 + k, k)
        got: list[Message] = []
        while len(got) < N + 1:  # now it reads: every answer
            msg = next_message(slow, 10.0)
            assert msg is not None, f"{len(got)} answers came, then none"
            got.extend(msg.items if isinstance(msg, Batch) else [msg])  # (written together)
        results = [m for m in got if isinstance(m, Result)]
        assert sorted(m.id for m in results) == list(range(N))  # (matched by id, not order)
        assert all(m.value == blob(m.id) for m in results)
        assert [m.req for m in got if isinstance(m, Pong)] == [7]  # (a Ping's answer: at once)
        slow.send(Call(N, "echo", ["again"]))  # and it is read again
        assert next_message(slow, 10.0) == Result(N, "again")
    finally:
        slow.close()
        good.close()
        rt.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("polybus-unread")
                and t.is_alive() and not t.daemon]
