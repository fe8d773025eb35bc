"""The counts of an aggregating binding say what was sent: a call of a batch that
cannot be encoded (failed alone, UnsendableError) is in no batch sent."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import UnsendableError

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.echo = { callstyle = "async", aggregate = 4, linger = "30s" }

[bind]
"client.echo" = "server.echo"
"""


@pytest.mark.timeout(60)
def test_a_call_that_cannot_be_encoded_is_not_counted_as_batched(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML) as c:
        s = c.session()
        ps = [s.call("echo", (object() if i == 1 else i,), {}) for i in range(4)]
        with pytest.raises(UnsendableError):
            polybus.wait(ps[1])
        assert [polybus.wait(p) for p in (ps[0], ps[2], ps[3])] == [0, 2, 3]
        assert c.runtimes[0].calls == 3
        counts = s.stats().interfaces["client.echo"]
        assert (counts["calls"], counts["batches"], counts["batched_calls"]) == (4, 1, 3)
        # A batch none of whose calls can be encoded is never sent: no batch counted.
        qs = [s.call("echo", (object(),), {}) for _ in range(4)]
        for q in qs:
            with pytest.raises(UnsendableError):
                polybus.wait(q)
        assert polybus.wait(s.call("echo", (9,), {})) == 9
        assert c.runtimes[0].calls == 4
        counts = s.stats().interfaces["client.echo"]
        assert (counts["calls"], counts["batches"], counts["batched_calls"]) == (9, 2, 4)
