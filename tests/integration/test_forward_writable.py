"""A forwarded value is not a cached operand, yet it may arrive read-only.

A promise passed as an argument goes replica to replica (use.forward, on by default).
The producer keeps its answer in the operand cache (forwarding.py, Forwarding.finished:
``rt.cache.put``), which makes the array read-only in place (cache.py); when the next
stage is the same replica, that very object is handed to the consumer. A consumer that
writes into its argument then fails, and the note of 4bb9332 tells the user that x "is
a cached operand", about an interface that caches nothing. The same program with the
value passed by the client (the producer answered first) runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import time
    import numpy as np

    def produce(n):
        time.sleep(0.3)  # (still unanswered when the consuming call is made: forwarded)
        return np.ones(n)

    def consume(x):
        x *= 2
        return float(x.sum())
"""

CLIENT = """
    from polybus import use, wait
    from polybus.errors import RemoteException

    produce, consume = use("produce"), use("consume")

    def main():
        try:
            return ["ok", wait(consume(produce(100_000)))]
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
    out = polybus.run(app, worker_output=None).result
    assert "cached operand" not in str(out)
    assert out == ["ok", 200_000.0]


STATEFUL = """
    import time
    import numpy as np

    state = np.zeros(100_000)

    def produce():
        time.sleep(0.3)  # (still unanswered when the consuming call is made: forwarded)
        state[:] += 1  # the module's own array, returned
        return state

    def consume(x):
        return float(x.sum())
"""

STATEFUL_CLIENT = """
    from polybus import use, wait
    from polybus.errors import RemoteException

    produce, consume = use("produce"), use("consume")

    def main():
        out = []
        for _ in range(2):
            try:
                out.append(wait(consume(produce())))
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
    out = polybus.run(app, worker_output=None).result
    assert out == [100_000.0, 200_000.0]
