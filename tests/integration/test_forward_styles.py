"""Which calls forward: the rule README and docs/strategies.md state, pinned.

A new-user trial read "on by default for async calls" as the producer's style alone, and
found a `sync` consumer never forwarding: the value goes replica to replica only when
the producer's call and the consumer's are both async (`async` or `async-demand`) and
neither binding has ``forward = false``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from polybus import wait
from polybus.client.session import Session

from .comm_harness import cluster, opened_at_wait

ROOT = Path(__file__).resolve().parents[2]
TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = { callstyle = "async", forward = PRODUCER }
use.add = { callstyle = "CONSUMER" }

[bind]
"client.add" = "server.add"
"client.gated_double" = "server.gated_double"
"""


def _forwarded(s: Session) -> int:
    """The promises the client's calls passed on to go replica to replica."""
    fwd = s.dispatchers["add"].forwarder
    return 0 if fwd is None else fwd.forwarded


@pytest.mark.parametrize(("consumer", "producer_forwards", "forwards"), [
    ("async", True, True), ("async-demand(2)", True, True), ("sync", True, False),
    ("async", False, False)])
def test_a_promise_is_forwarded_only_between_two_async_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, consumer: str,
        producer_forwards: bool, forwards: bool) -> None:
    # The producer answers once the gate is made: after the consuming call (an async
    # one returns at once), or, a sync one, as that call waits for the promise where it
    # is made. Either way the promise is unanswered when the consuming call is made
    # (with a 0.2 s producer, a client that stalled that long between the two calls
    # found the value answered, and counted no forwarding).
    toml = TOML.replace("CONSUMER", consumer).replace("PRODUCER",
                                                       str(producer_forwards).lower())
    gate = tmp_path / "gate"
    opened_at_wait(monkeypatch, gate)
    with cluster(tmp_path, toml) as c:
        s = c.session()
        try:
            p = s.call("gated_double", (np.ones(4), str(gate)), {})
            assert not p.done
            q = s.call("add", (p, np.ones(4)), {})
        finally:
            gate.touch()
        assert list(wait(q)) == [3.0] * 4
        assert _forwarded(s) == int(forwards)


def test_the_docs_state_both_calls_must_be_async() -> None:
    row = next(line for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith("| results forwarded to the next stage"))
    assert "both calls are async" in row and "a `sync` consumer" in row, row
    strategies = (ROOT / "docs" / "strategies.md").read_text()
    forward = strategies[strategies.index("### `forward`"):]
    assert re.search(r"Both calls must be async", forward)
    assert "A `sync` consumer waits for its promises where it is made" in forward
