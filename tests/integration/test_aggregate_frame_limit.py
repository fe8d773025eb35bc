"""An aggregated call over the frame limit (``max_frame``) fails alone, with the error
an unaggregated call gets, and the calls batched with it are answered."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import MessageTooLarge

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

[cluster]
max_frame = "1MiB"
"""


@pytest.mark.timeout(60)
def test_a_call_over_the_frame_limit_fails_alone_in_its_batch(tmp_path: Path) -> None:
    # A str of 2 MB goes the lean way (only bytes of 64 KiB or more do not): its batch
    # could not be written, and MessageTooLarge came out of the next call, made by the
    # program on another value, while the big call's promise was never answered.
    with cluster(tmp_path, TOML) as c:
        s = c.session()
        ps = [s.call("echo", ("x" * (2 << 20) if i == 1 else i,), {}) for i in range(4)]
        with pytest.raises(MessageTooLarge, match=r"^echo\(\.\.\.\): the call's message of "
                           r"\d+ bytes is over the frame limit.*max_frame"):
            polybus.wait(ps[1])
        assert [polybus.wait(p) for p in (ps[0], ps[2], ps[3])] == [0, 2, 3]
        assert polybus.wait(s.call("echo", (9,), {})) == 9  # (the replica serves on)
        counts = s.stats().interfaces["client.echo"]
        assert counts["batched_calls"] == 4 and c.runtimes[0].calls == 4

