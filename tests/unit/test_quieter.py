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
