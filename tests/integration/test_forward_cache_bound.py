"""f0f79d1: the operand cache's bound now ignores interfaces that set no ``cache``, but
the cache also keeps forwarded answers (worker/forwarding.py: ``fwd:<pkey>``).

Here ``consume`` caches B with cache_bytes = "1MiB" and ``produce`` caches nothing. Before
f0f79d1 the replica's cache was 512 MiB (produce's default); now it is 1 MiB, and:

- ``consume(p, b1)`` hung for ever: the call was held for p's forwarded value with b1
  not looked up (resolve stopped at the first Ref, p's); p's 1.6 MB answer, kept in the
  cache, evicted b1; the call then missed b1, and the client sent it again naming p's
  forwarded key, which the replica had already taken and never gets again. (The same
  hang was there before f0f79d1 with a small enough bound on every define.) Fixed.
- the Put of the next B evicted produce's forwarded answer, and ``wait(p)`` failed with
  "could not be fetched ... (gone or evicted)". Fixed: forwarded answers are kept in a
  store of their own (Forwarding.kept), not in the operand cache.

``produce`` answers once the client has made the call that consumes it (the client makes
the file ``gate`` beside the modules then), so its answer is forwarded every time: with a
0.3 s producer, a client that stalled that long sent p's value itself, and the test ran
without the forwarding it is about.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import time
    from pathlib import Path

    import numpy as np

    GATE = Path(__file__).parent / "gate"

    def produce(n):
        # until consume(p, ...) is called (10 s at most): its answer is forwarded
        end = time.monotonic() + 10
        while not GATE.exists() and time.monotonic() < end:
            time.sleep(0.001)
        return np.ones(n)

    def consume(x, b):
        return float(x.sum() + b.sum())
"""

CLIENT = """
    from pathlib import Path

    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteError

    produce, consume = use("produce"), use("consume")
    GATE = Path(__file__).parent / "gate"

    def main():
        b1, b2 = np.zeros(100_000), np.ones(100_000)
        p = produce(200_000)
        q = consume(p, b1)
        GATE.touch()  # (p's consumer called: p may answer)
        first = wait(q)
        second = wait(consume(np.zeros(10), b2))  # its Put comes after p's answer
        try:
            kept = float(wait(p).sum())
        except RemoteError as exc:
            kept = str(exc)
        return [first, second, kept]
"""

TOML = """
    [modules.server]
    source = "server.py"
    define.produce = {}
    define.consume = { cache = ["b"], cache_bytes = "1MiB" }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.produce = { callstyle = "async" }
    use.consume = { callstyle = "async" }

    [bind]
    "client.produce" = "server.produce"
    "client.consume" = "server.consume"
"""


@pytest.mark.timeout(60)
def test_a_call_held_for_a_forwarded_value_keeps_its_cached_operand(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    run = polybus.run(app, worker_output=None)
    assert run.result[:2] == [200_000.0, 100_000.0]
    assert run.interfaces["client.produce"]["forwarded"] == 1


@pytest.mark.timeout(60)
def test_a_forwarded_answer_can_still_be_fetched_after_the_next_put(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    run = polybus.run(app, worker_output=None)
    assert run.result == [200_000.0, 100_000.0, 200_000.0]
    assert run.interfaces["client.produce"]["forwarded"] == 1  # (then fetched: p's own)


MISSING_CLIENT = """
    from pathlib import Path

    import numpy as np
    from polybus import use, wait

    produce, consume = use("produce"), use("consume")
    GATE = Path(__file__).parent / "gate"

    def main():
        b1, b2 = np.zeros(100_000), np.ones(100_000)
        p = produce(200_000)
        wait(consume(np.zeros(10), b1))
        wait(consume(np.zeros(10), b2))  # its Put evicts b1 (1 MiB): the client does not know
        q = consume(p, b1)  # names b1 and p's forwarded value
        GATE.touch()
        return wait(q)
"""


@pytest.mark.timeout(60)
def test_a_call_that_misses_an_operand_does_not_take_its_forwarded_value(tmp_path: Path) -> None:
    """The call was held for p with b1 not looked up, took p's value when it came, then
    missed b1; sent again naming p's key, already taken, it waited for ever.

    p's Forward is written when consume(p, b1) is made, before the gate opens, so p's
    value goes replica to replica for each of the consumer's two tries, whether the miss
    comes back before p answers (a second Forward) or after (forwarded from the store).
    It went through the client, twice, in 1 run of 6 while the replica answered without
    reading the Forward another of its threads had read (worker/heeding.py)."""
    toml = TOML.replace('cache_bytes = "1MiB" }', 'cache_bytes = "1MiB", pool = 2 }')
    app = write_app(tmp_path, server=SERVER, client=MISSING_CLIENT, toml=toml)
    # (p unanswered when consume(p, b1) is made: that call names p's forwarded value)
    run = polybus.run(app, worker_output=None)
    assert run.result == 200_000.0
    assert run.interfaces["client.consume"]["cache_misses"] == 1
    produced = run.interfaces["client.produce"]
    assert (produced["forwarded"], produced["through_client"]) == (2, 0)
