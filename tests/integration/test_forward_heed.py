"""A Forward written before its producer answers is heeded, whichever thread reads it.

Before a large answer goes back, its replica reads what the client sent while the call
ran (`WorkerRuntime.heed`), so that a Forward asked meanwhile sends the value on. With a
pool of 2 the other thread may hold the poller role then: it had read the Forward but not
yet handled it, and the answer went to the client by value (test_forward_cache_bound's
third test: forwarded 0, through the client 2, in 1 run of 6). Here the poller is held
in the Forward's handling until the producer answers; the answer waits for it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
from polybus.wire.codec import Ref
from polybus.wire.messages import Forward

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.gated_double = { pool = 2 }
define.double = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = { callstyle = "async" }
use.double = { callstyle = "async" }

[bind]
"client.gated_double" = "server.gated_double"
"client.double" = "server.double"
"""


@pytest.mark.timeout(60)
def test_a_forward_read_by_another_thread_is_heeded_before_the_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = tmp_path / "flag"
    x = np.ones(200_000)  # 1.6 MB: an answer that waits for what its client sent
    with cluster(tmp_path, TOML) as c:
        fw = c.runtimes[0].forwarding
        read, answering, decided = threading.Event(), threading.Event(), threading.Event()
        real_handle, real_finished = fw.handle, fw.finished

        def handle(ch: Any, msg: Any) -> None:
            if isinstance(msg, Forward) and not read.is_set():
                read.set()
                # (the poller, the Forward read and not yet handled, stalls until the
                # producer answers: as a loaded machine may keep it)
                assert answering.wait(10), "the producer never answered"
                decided.wait(0.5)  # (the answer, were it decided meanwhile)
            real_handle(ch, msg)

        def finished(ch: Any, call: Any, reply: Any) -> Any:
            answering.set()
            try:
                return real_finished(ch, call, reply)
            finally:
                decided.set()

        monkeypatch.setattr(fw, "handle", handle)
        monkeypatch.setattr(fw, "finished", finished)
        s = c.session()
        try:
            p = s.call("gated_double", (x, str(flag)), {})
            q = s.call("double", (p,), {})
            assert read.wait(10), "the Forward never reached the poller"
            flag.touch()
            assert float(polybus.wait(q, timeout=10).sum()) == 4 * x.size
            assert type(p._rec.value) is Ref, type(p._rec.value)  # sent on, not to the client
        finally:  # (a failure leaves no poller stalled in the Forward's handling)
            answering.set()
            decided.set()
