"""A priority that reads a forwarded argument waits for it at the client: said once.

A new-user trial's ``priority = "len(x)"``, x given a promise, sent every value through
the client (3.2 MB each way where 784 B went without the priority), and nothing said
why: the client computes the priority when the call is made, so it must have x then.

The producers (``gated_double``) answer once a gate is made, so that each promise is
unanswered when its consumer is called (with 0.2 s producers, a client that stalled that
long found the values answered: nothing forwarded, nothing said). A call that forwards
returns at once, and the gate is made after it; one whose priority needs a promise's
value waits for it there, and the gate is made as it does (`opened_at_wait`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polybus import wait
from polybus.client.session import Session

from .comm_harness import cluster, opened_at_wait

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.add = { priority = "PRIORITY" }
define.gated_double = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.add = { callstyle = "async" }
use.gated_double = { callstyle = "async" }

[bind]
"client.add" = "server.add"
"client.gated_double" = "server.gated_double"
"""


def _edges(s: Session) -> int:
    """The promises the client's calls of ``add`` passed on to be forwarded."""
    fwd = s.dispatchers["add"].forwarder
    assert fwd is not None
    return fwd.forwarded


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "priority" in r.getMessage()]


def test_a_priority_reading_a_promise_says_forwarding_does_not_apply_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    gate = tmp_path / "gate"
    opened_at_wait(monkeypatch, gate)  # (as the first call's priority waits for x)
    with cluster(tmp_path, TOML.replace("PRIORITY", "len(x)")) as c, \
            caplog.at_level("WARNING", logger="polybus.client"):
        s = c.session()
        try:
            ps = [s.call("gated_double", (np.ones(4), str(gate)), {}) for _ in range(2)]
            qs = [s.call("add", (p, np.ones(4)), {}) for p in ps]
        finally:
            gate.touch()
        got = wait(qs)
        assert [list(g) for g in got] == [[3.0] * 4] * 2
        assert _edges(s) == 0  # (each value came to the client and went on from it)
        said = _said(caplog)
        assert len(said) == 1, said  # (once a binding)
        assert said[0].startswith(
            "polybus: warning: add's priority 'len(x)' reads x, which this call passes an "
            "unanswered promise: the client needs its value to compute the priority")
        assert "set forward = false on the binding" in said[0]


def test_a_priority_reading_other_arguments_forwards_and_says_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with cluster(tmp_path, TOML.replace("PRIORITY", "len(y)")) as c, \
            caplog.at_level("WARNING", logger="polybus.client"):
        s = c.session()
        gate = tmp_path / "gate"
        try:
            p = s.call("gated_double", (np.ones(4), str(gate)), {})
            q = s.call("add", (p, np.ones(4)), {})
        finally:
            gate.touch()
        assert list(wait(q)) == [3.0] * 4
        assert _edges(s) == 1  # (the call named the promise: the value went on from its replica)
        assert _said(caplog) == []


INNER = TOML.replace('define.add = { priority = "PRIORITY" }',
                     'define.inner = { priority = "PRIORITY" }').replace(
    '"client.add" = "server.add"', '"client.inner" = "server.inner"').replace(
    'use.add = { callstyle = "async" }', 'use.inner = { callstyle = "async" }')


def test_a_priority_waiting_for_promises_in_a_list_says_so_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # len(xs[0]) reads the first promise's value: the client waits for it there (and
    # the gate is made then: each shape's producers are unanswered at its call)
    gate = tmp_path / "gate"
    opened_at_wait(monkeypatch, gate)
    with cluster(tmp_path, INNER.replace("PRIORITY", "len(xs[0])"), replicas=2) as c, \
            caplog.at_level("WARNING", logger="polybus.client"):
        s = c.session()
        for shape in (list, tuple, lambda ps: {0: ps[0], 1: ps[1]}):
            gate.unlink(missing_ok=True)  # (the last shape's producers have answered)
            try:
                ps = [s.call("gated_double", (np.ones(4), str(gate)), {}) for _ in range(2)]
                q = s.call("inner", (shape(ps),), {})
            finally:
                gate.touch()
            got = wait(q)
            assert got[1] == [8.0, 8.0], got
        said = _said(caplog)
        assert len(said) == 1, said  # (once a binding)
        assert said[0].startswith(
            "polybus: warning: inner's priority 'len(xs[0])' reads xs, which this call passes "
            "a list holding unanswered promises: the client waited for a value among them "
            "to compute the priority, so what it waited for went through the client"), said[0]
        assert "set forward = false on the binding" in said[0]
        assert "len(xs) needs no value" in said[0]


def test_a_priority_reading_a_list_of_promises_without_their_values_says_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # len(xs) of a list needs no value: the promises in it are forwarded
    with cluster(tmp_path, INNER.replace("PRIORITY", "len(xs)"), replicas=2) as c, \
            caplog.at_level("WARNING", logger="polybus.client"):
        s = c.session()
        gate = tmp_path / "gate"
        try:
            ps = [s.call("gated_double", (np.ones(4), str(gate)), {}) for _ in range(2)]
            q = s.call("inner", ({"a": ps[0], "b": ps[1]},), {})
        finally:
            gate.touch()
        got = wait(q)
        assert got[1] == [8.0, 8.0], got
        fwd = s.dispatchers["inner"].forwarder
        assert fwd is not None and fwd.forwarded == 2
        assert _said(caplog) == []
