"""A call given up on (its binding's timeout passed) by one thread while another thread
reads its answer: whichever comes first, its place in its replica's window is freed
once. The reader took the record out of the link's calls, the wait then failed it, and
the reader's answer, finding it failed, freed nothing, nor did the wait, which no longer
found it there: under async-demand(1) that replica took no call again, and a program
waiting for a call behind it in the backlog waited for ever. (The window is a few
steps wide; a hook holds the reader inside it until the give-up is done.)"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from polybus.client.calls import CallRecord, ReplicaLink, give_up
from polybus.client.dispatch import Dispatcher
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import CallTimeoutError
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Fail, Message, Result


@pytest.mark.parametrize("answer", [Result(1, 7), Fail(1, "exception", "ValueError", "no")],
                         ids=["value", "failure"])
def test_an_answer_read_as_its_call_is_given_up_on_frees_its_place_once(
        answer: Message, monkeypatch: pytest.MonkeyPatch) -> None:
    reactor = Reactor()
    a, b = socket.socketpair()
    link = ReplicaLink("L", "m", Channel(a, Codec(), "L"))
    reactor.add(link)
    d = Dispatcher("f", reactor, [link], CallStyle("async-demand", 1), timeout=0.1)
    rec = CallRecord(1, d, [], None, 0.0)
    d._send(rec, link)  # (in flight: the replica's one place taken)
    assert d.inflight == [1]
    in_window, given_up = threading.Event(), threading.Event()
    name = "set_value" if type(answer) is Result else "set_error"
    setter = getattr(CallRecord, name)

    def held(self: CallRecord, outcome: Any) -> bool:
        if self is rec and not in_window.is_set():  # (taken out of the link's calls,
            in_window.set()  # its outcome not yet set)
            assert given_up.wait(10)
        return bool(setter(self, outcome))

    monkeypatch.setattr(CallRecord, name, held)
    reader = threading.Thread(target=reactor._handle, args=(link, answer))
    try:
        reader.start()
        assert in_window.wait(10)
        assert give_up(rec, 0.1)
        given_up.set()
        reader.join(10)
        assert not reader.is_alive()
        assert isinstance(rec.error, CallTimeoutError)
        assert d.inflight == [0]  # (its place free: the next call is placed)
        assert not link.abandoned  # (no answer left to wait for)
    finally:
        given_up.set()
        reactor.close()
        b.close()
