"""A promise of a module with pickle on, passed to a call of a module with pickle off,
is not sent replica to replica: the producer's replica would pickle a datetime or a
dataclass (wire/pickling.py) for a replica that refuses any pickled value, and the
consuming call waited forever. Its value comes through the client, which sends it as
the consumer's codec carries it (a date as a str), as with ``forward = false``."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import datetime
    import time

    def stamp(n):
        time.sleep(0.3)  # (still unanswered when its promise is passed on)
        return {"day": datetime.date(2024, 5, n)}

    def kind(d):
        return [type(d["day"]).__name__, d["day"]]
"""

CLIENT = """
    from polybus import use, wait

    stamp = use("stamp"); kind = use("kind"); astamp = use("astamp")

    def main():
        one = wait(kind(stamp(3)))
        batch = wait([kind(astamp(i + 1)) for i in range(4)])
        return one, batch
"""

TOML = """
    [modules.first]
    source = "server.py"
    replication = 1
    pickle = true
    transport = "TRANSPORT"

    [modules.second]
    source = "server.py"
    replication = 1
    transport = "TRANSPORT"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.stamp = { callstyle = "async" }
    use.astamp = { callstyle = "async", aggregate = 2 }
    use.kind = { callstyle = "async" }

    [bind]
    "client.stamp" = "first.stamp"
    "client.astamp" = "first.stamp"
    "client.kind" = "second.kind"
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_pickle_on_stage_feeds_a_pickle_off_stage(tmp_path: Path, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.replace("TRANSPORT", transport))
    r = polybus.run(app, worker_output=False, timeout=40)
    one, batch = r.result
    assert one == ["str", "2024-05-03"], one
    assert batch == [["str", f"2024-05-0{i + 1}"] for i in range(4)], batch
