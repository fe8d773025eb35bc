"""An aggregated call whose batch carries its cached operands by value, over the frame
limit, fails alone saying why.

A batch whose call names cached operands that together pass what the replicas keep
(`cache_bytes`) sends them by value (Pending.by_value: they could never all be kept
there at once). The checks that find which call of a batch over ``max_frame`` fails
(client/batchsend.py `refuse`) encoded its calls with those operands left out, as a
named batch carries them: every call fit, and the bare MessageTooLarge ("message of
1116928 bytes ...") came out of the program's call that wrote the batch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.errors import MessageTooLarge

from . import comm_harness
from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.three = { cache = ["a", "b"], cache_bytes = "100KiB" }

[modules.client]
source = "client.py"
entrypoint = "main"
use.three = { callstyle = "async", aggregate = 8, linger = "%s" }

[bind]
"client.three" = "server.three"

[cluster]
max_frame = "1MiB"
"""

THREE = """
def three(xs, a, b):
    return [len(xs), not a.flags.writeable]
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("linger", ["30s", "20ms"])  # (written by a call, or by the timer)
def test_a_call_whose_batch_carries_its_operands_by_value_fails_saying_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linger: str) -> None:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + THREE)
    # a and b, 200 KB each, pass cache_bytes together: they go by value, beside a list
    # of 700 KB (guessed at 9 bytes an item): 1.1 MB, over the 1 MiB limit.
    a, b = np.ones(25_000), np.full(25_000, 2.0)
    with cluster(tmp_path, TOML % linger) as c:
        s = c.session()
        p = s.call("three", (["x" * (350 << 10), "y" * (350 << 10)], a, b), {})
        with pytest.raises(MessageTooLarge, match=r"^three\(\.\.\.\): the call's message of "
                           r"\d+ bytes is over the frame limit.*; its cached operands went "
                           r"with it by value, as together \(\d+ bytes\) they pass what its "
                           r"replicas keep \(cache_bytes, 102400 bytes\)"):
            polybus.wait(p, timeout=20)
        # (the replica serves on; a smaller list goes, its operands by value)
        assert polybus.wait(s.call("three", (["x"], a, b), {}), timeout=20) == [1, False]
