"""An answer that does not fit the call it names is a protocol error of its replica.

A replica written from docs/protocol.md in another language may get the kinds of
answer wrong: a `BatchResult` for a plain `Call`, a `Result` for an aggregated batch
(`CallBatch`), a `BatchResult` with another count of values than the batch has calls,
or a `Fail` in it for a call the batch does not have. The client raised an internal
`AttributeError` or `IndexError` out of the program's call (or, for a batch of other
length or a stray Fail, gave its calls wrong values); it now takes such a replica for
lost with a `ProtocolError` saying what came (its calls go on as for any replica lost),
as it does for a message it cannot decode. Here the only replica is a scripted one that
answers every call so: the call fails with `ConnectionLostError` naming what came.
"""

from __future__ import annotations

import re
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from polybus import wait
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.config import load
from polybus.errors import ConnectionLostError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.testing.peers import next_message
from polybus.token import make_token
from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address, accept, listen
from polybus.wire.codec import Codec
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Fail,
    Goodbye,
    Message,
    Ping,
    Pong,
    Replica,
    Result,
    Stats,
    StatsRequest,
)

Wrong = Callable[[Message], list[Message]]

TOML = """
[modules.server]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "async", aggregate = 4, linger = "10s" }
use.single = {}

[bind]
"client.double" = "server.double"
"client.single" = "server.double"
"""


class Scripted:
    """A replica of `double` that answers each call by ``wrong``."""

    def __init__(self, token: bytes, wrong: Wrong) -> None:
        self.token, self.wrong = token, wrong
        self.listener, self.address = listen(Address.parse("tcp://127.0.0.1:0"))
        self.channels: list[Channel] = []
        self.threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                ch = accept(self.listener, self.token, Codec())
            except Exception:  # (the listener closed: the test is over)
                return
            self.channels.append(ch)
            t = threading.Thread(target=self._serve, args=(ch,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, ch: Channel) -> None:
        gone = Goodbye("closed")
        while True:
            msg = next_message(ch, 60.0, closed=gone)
            if msg is None or msg is gone or isinstance(msg, Goodbye):
                return
            calls = msg.items if isinstance(msg, Batch) else [msg]
            try:
                for m in calls:
                    if isinstance(m, Ping):
                        ch.send(Pong(m.req))
                    elif isinstance(m, StatsRequest):
                        ch.send(Stats("server-0", 0, 0.0, 0.0, 0, 0, req=m.req))
                    elif isinstance(m, Call | CallBatch):
                        for a in self.wrong(m):
                            ch.send(a)
            except Exception:  # (the client hung up on it)
                return

    def close(self) -> None:
        self.listener.close()
        for ch in self.channels:
            ch.close()
        for t in self.threads:
            t.join(5.0)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[Callable[[Wrong], Session]]:
    (tmp_path / "server.py").write_text("def double(x):\n    return x * 2\n")
    (tmp_path / "client.py").write_text("def main():\n    return None\n")
    (tmp_path / "app.toml").write_text(textwrap.dedent(TOML))
    token = make_token()
    made: list[Any] = []
    registry = RegistryService(token, "tcp://127.0.0.1:0", ttl=60.0)
    reg_client = RegistryClient(str(registry.address), token)

    def make(wrong: Wrong) -> Session:
        replica = Scripted(token, wrong)
        made.append(replica)
        reg_client.register(Replica("server-0", "server", str(replica.address), ["double"]))
        session = Session(load(tmp_path / "app.toml"), str(registry.address), token)
        made.append(session)
        activate(session)
        return session

    try:
        yield make
    finally:
        activate(None)
        for thing in reversed(made):
            thing.close()
        reg_client.close()
        registry.close()


def test_a_call_answered_as_a_batch(scripted: Callable[[Wrong], Session]) -> None:
    s = scripted(lambda m: [BatchResult(m.id, [0], [])])
    with pytest.raises(ConnectionLostError, match=(
            r"server-0 sent a BatchResult for call \d+, which is not an aggregated batch: "
            + re.escape("not an answer to what it was sent (a protocol error)"))):
        s.call("single", (21,), {})


@pytest.mark.parametrize(("wrong", "said"), [
    (lambda m: [Result(m.id, [0, 0, 0, 0])], "a Result for aggregated batch"),
    (lambda m: [BatchResult(m.id, [0, 0], [])],
     "a BatchResult of 2 values for a batch of 4 calls"),
    (lambda m: [BatchResult(m.id, [0] * 5, [])],
     "a BatchResult of 5 values for a batch of 4 calls"),
    (lambda m: [BatchResult(m.id, [None] * 4, [Fail(4, "exception", "ValueError", "x")])],
     "a Fail for call 4 of a batch of 4 calls"),
    (lambda m: [BatchResult(m.id, [None] * 4, [Fail(-1, "exception", "ValueError", "x")])],
     "a Fail for call -1 of a batch of 4 calls"),
])
def test_a_batch_answered_wrongly(scripted: Callable[[Wrong], Session], wrong: Wrong,
                                  said: str) -> None:
    s = scripted(wrong)
    promises = [s.call("double", (i,), {}) for i in range(4)]
    with pytest.raises(ConnectionLostError, match=f"server-0 sent {re.escape(said)}"):
        wait(promises)
