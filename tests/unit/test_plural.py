"""A count said with its noun: "1 request", not "1 requests" (polybus/plural.py), in
the messages that count what may be one."""

from __future__ import annotations

import pytest

from polybus.plural import plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert [plural(n, "request") for n in (0, 1, 2)] == ["0 requests", "1 request",
                                                         "2 requests"]
    assert plural(1, "process", "processes") == "1 process"
    assert plural(3, "process", "processes") == "3 processes"


def test_an_inproc_backlog_of_one_says_one_connection() -> None:
    from polybus.errors import TransportError
    from polybus.transport.inproc import dial, listen

    lst = listen("plural-test", backlog=1)
    first = dial("plural-test", 1.0)
    try:
        with pytest.raises(TransportError) as info:
            dial("plural-test", 1.0)
    finally:
        first.close()
        lst.close()
    assert "its backlog is full (1 connection waiting to be accepted)" in str(info.value)
