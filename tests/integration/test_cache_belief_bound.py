"""What the client believes a replica holds stays within the replica's cache bound.

Found by a review: the client keeps, per replica, the names it has put there (and their
sizes: client/held.py). Single calls added each Put and never let go of one but by a
Drop, which only an array's last copy freed sends; bytes are never dropped (no weak
reference can follow them). A long-lived client caching fresh bytes at each call (a
request body under ``cache = "auto"``, say) kept every name it ever sent, 1,000 calls a
thousand names, while the replica's LRU had evicted all but a few."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polybus.client.naming import known_for

from .comm_harness import call, cluster

TOML = """
[modules.server]
source = "server.py"
define.echo = { cache = ["x"], cache_bytes = "1MiB" }

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.echo" = "server.echo"
"""


@pytest.mark.timeout(60)
def test_fresh_bytes_each_call_are_not_all_remembered(tmp_path: Path) -> None:
    with cluster(tmp_path, TOML) as c:
        s = c.session()
        for _ in range(200):
            body = os.urandom(64 << 10)
            assert call(s, "echo", body) == body
        cache = c.runtimes[0].cache
        assert cache.bytes <= 1 << 20 and len(cache) <= 16
        held = known_for(s).by_replica["server-0"]
        # (the replica holds 16 of 64 KiB: the client may believe a little more, not 200)
        assert len(held) <= 2 * 16 and held.bytes <= 2 << 20, (len(held), held.bytes)
