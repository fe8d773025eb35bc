"""A forwarded value is not a cached operand, yet it may arrive read-only.

A promise passed as an argument goes replica to replica (use.forward, on by default).
The producer keeps its answer in the operand cache (forwarding.py, Forwarding.finished:
``rt.cache.put``), which makes the array read-only in place (cache.py); when the next
stage is the same replica, that very object is handed to the consumer. A consumer that
writes into its argument then fails, and the note of 4bb9332 tells the user that x "is
a cached operand", about an interface that caches nothing. The same program with the
value passed by the client (the producer answered first) runs.

The producer answers once the client has made the consuming call (it makes the file
``gate`` beside the modules then), so its answer is forwarded every time: with a 0.3 s
producer, a client that stalled that long passed the value itself, and the test ran
without the forwarding it is about (it passed, pinning nothing).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

GATED = """
    import time
    from pathlib import Path

    GATE = Path(__file__).parent / "gate"

    def gated():
        # until the client has made the consuming call (10 s at most): so this answer
        # is still unanswered when that call is made, and forwarded
        end = time.monotonic() + 10
        while not GATE.exists() and time.monotonic() < end:
            time.sleep(0.001)
"""

SERVER = GATED + """
    import numpy as np

    def produce(n):
        gated()
        return np.ones(n)

    def consume(x):
        x *= 2
        return float(x.sum())
"""

CLIENT = """
    from pathlib import Path

    from polybus import use, wait
    from polybus.errors import RemoteException

    produce, consume = use("produce"), use("consume")
    GATE = Path(__file__).parent / "gate"

    def main():
        try:
            q = consume(produce(100_000))
            GATE.touch()  # (the consuming call made: the producer may answer)
            return ["ok", wait(q)]
        except RemoteException as exc:
            return [exc.remote_type, exc.remote_message]
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.produce = {{ callstyle = "async" }}
    use.consume = {{ callstyle = "async" }}

    [bind]
    "client.produce" = "server.produce"
    "client.consume" = "server.consume"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_forwarded_value_is_writable_and_never_called_a_cached_operand(
        tmp_path: Path, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(transport=transport))
    run = polybus.run(app, worker_output=None)
    out = run.result
    assert "cached operand" not in str(out)
    assert out == ["ok", 200_000.0]
    assert run.interfaces["client.produce"]["forwarded"] == 1


STATEFUL = GATED + """
    import numpy as np

    state = np.zeros(100_000)

    def produce():
        gated()
        state[:] += 1  # the module's own array, returned
        return state

    def consume(x):
        return float(x.sum())
"""

STATEFUL_CLIENT = """
    from pathlib import Path

    from polybus import use, wait
    from polybus.errors import RemoteException

    produce, consume = use("produce"), use("consume")
    GATE = Path(__file__).parent / "gate"

    def main():
        out = []
        for _ in range(2):
            GATE.unlink(missing_ok=True)  # (the last producer has answered)
            try:
                q = consume(produce())
                GATE.touch()
                out.append(wait(q))
            except RemoteException as exc:
                out.append([exc.remote_type, exc.remote_message])
        return out
"""


@pytest.mark.timeout(60)
def test_forwarding_an_answer_does_not_freeze_the_producers_own_array(tmp_path: Path) -> None:
    """Forwarding.finished puts the answer in the operand cache, which sets
    writeable = False on the object the function returned: a producer that returns an
    array it keeps and updates fails on its next call ("output array is read-only"),
    only when its answer was forwarded (a consuming call made before it answered)."""
    app = write_app(tmp_path, server=STATEFUL, client=STATEFUL_CLIENT,
                    toml=TOML.format(transport="tcp").replace("produce(100_000)", "produce()"))
    run = polybus.run(app, worker_output=None)
    assert run.result == [100_000.0, 200_000.0]
    assert run.interfaces["client.produce"]["forwarded"] == 2
