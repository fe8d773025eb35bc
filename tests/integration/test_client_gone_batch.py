"""A client that goes while its replica runs one of its aggregated batches leaves the
rest of that batch unrun: its calls not begun are calls it has not started, dropped as
a dead client's queued calls are (docs/reliability.md, "The client dies"); the call
running finishes. Found by tests/integration/chaosreg.py: a client killed mid-run at
workers started by hand, whose replica then ran the rest of a batch of 64 calls for
nobody (a second and more of calls begun after the client went)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .comm_harness import cluster
from .test_client_gone import _until

TOML = """
[modules.server]
source = "server.py"
define.until = { pool = 1 }

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async", aggregate = 8, linger = "30s" }  # (sent when full)

[bind]
"client.until" = "server.until"
"""


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_the_rest_of_a_batch_of_a_client_gone_is_not_run(tmp_path: Path, transport: str) -> None:
    hang = tmp_path / "hang"
    with cluster(tmp_path, TOML, transport=transport) as c:
        rt = c.runtimes[0]
        try:
            s = c.session()
            ps = [s.call("until", (i, str(hang)), {}) for i in range(8)]  # (one batch)
            s.reactor.flush_all()
            assert _until(lambda: rt._running == 1), "the batch never began"
            [ch] = list(rt._channels)
            s.close()  # (its connections closed, no goodbye: as a process that ends)
            assert _until(lambda: ch.closed and not rt._channels), len(rt._channels)
        finally:
            hang.touch()  # (the call running ends)
        assert _until(lambda: not rt._running)
        assert rt.calls == 1, f"{rt.calls} calls of the batch ran, for a client gone"
        del ps
