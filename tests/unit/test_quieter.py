"""Quieter: a repeated warning is said once a window, with the count held back."""

from __future__ import annotations

import pytest

from polybus import quieter
from polybus.quieter import Quieter


def test_the_first_of_a_kind_then_one_a_window_with_the_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(quieter.time, "monotonic", lambda: now[0])
    q = Quieter(window=60.0)
    refused = "peer 127.0.0.1:{}: wrong cluster token"
    assert q.let(refused.format(5001)) == refused.format(5001)
    for port in range(5002, 5010):  # each retry from a new port: the same kind
        now[0] += 3
        assert q.let(refused.format(port)) is None
    assert q.let("peer 127.0.0.1:6000: protocol version not supported") is not None
    now[0] += 60
    assert q.let(refused.format(5010)) == (refused.format(5010)
                                           + " (and 8 more like it since the last said)")
    assert q.let(refused.format(5011)) is None


def test_what_is_still_held_back_is_said_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that retried a few times and gave up left its count unsaid: it was said
    only with a next refusal, a window later, which never came."""
    now = [100.0]
    monkeypatch.setattr(quieter.time, "monotonic", lambda: now[0])
    q = Quieter(window=60.0)
    refused = "peer 127.0.0.1:{}: wrong cluster token"
    assert q.let(refused.format(1)) is not None
    for port in (2, 3, 4):
        now[0] += 1
        assert q.let(refused.format(port)) is None
    assert q.let("peer 127.0.0.1:9: protocol version not supported") is not None
    assert q.rest() == [f"3 more like this since the last said, the last: {refused.format(4)}"]
    assert q.rest() == []  # said once
    now[0] += 1
    assert q.let(refused.format(5)) is None  # (still within the window of the first)
    assert q.rest() == [f"1 more like this since the last said, the last: {refused.format(5)}"]


def test_counts_of_kinds_forgotten_to_bound_memory_are_still_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(quieter.time, "monotonic", lambda: now[0])
    q = Quieter(window=60.0)
    for i in range(1001):  # a thousand and one kinds, each refused twice
        kind = f"peer 10.0.{i // 256}.{i % 256}: wrong cluster token"
        assert q.let(kind) is not None
        assert q.let(kind) is None
    now[0] += 61  # all quiet a window: the next new kind forgets them
    assert q.let("peer 127.0.0.1:1: protocol version not supported") is not None
    assert q.rest() == ["1001 more held back, of kinds since forgotten (to bound memory)"]
    assert q.rest() == []


def test_strangers_that_sent_other_bytes_are_one_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal quotes what a stranger sent (`b'GET / HT'...`): strangers sending
    random bytes from new connections are one kind, not a line each."""
    now = [100.0]
    monkeypatch.setattr(quieter.time, "monotonic", lambda: now[0])
    q = Quieter(window=60.0)
    said = "127.0.0.1:{}: not a polybus peer (it sent {!r}...: another protocol)"
    assert q.let(said.format(1, b"GET / HT")) is not None
    for port, sent in enumerate([b"\x00\xff'\"\\", b"\x16\x03\x01", b'say "hi"', b"it's"], 2):
        now[0] += 1
        assert q.let(said.format(port, sent)) is None, sent
    assert q.let("127.0.0.1:9: wrong cluster token") is not None  # (another kind)
