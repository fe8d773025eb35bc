"""A `broadcast` handle stands for the bytes as they were broadcast (docs/tuning.md), whatever
the program does to the array afterwards, on every transport.

Found by a new-user trial: ``h1 = broadcast(t); t[0] = 42.0; h2 = broadcast(t)``, then
``peek(h1)`` gave 42.0. The second broadcast released t's old content, so the replicas
were told to drop it, and h1, missing there, was sent again from the live, changed
array. A replica that evicts a handle's content likewise got the changed bytes under
the old name.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import polybus
from integration.conftest import cli
from polybus.testing.apps import write_app

from .comm_harness import cluster

SERVER = """
    import numpy as np

    def peek(b):
        return float(np.asarray(b)[0])
"""

CLIENT = """
    import numpy as np
    import polybus
    from polybus import use, wait

    peek = use("peek")

    def main():
        t = np.arange(100_000.0)  # 800 KB: the replicas' cache (1 MiB) holds one
        h1 = polybus.broadcast(t)
        out = [wait(peek(h1))]
        t[0] = 42.0  # changed in place and broadcast again: a new handle
        h2 = polybus.broadcast(t)
        out += [wait(peek(h2)), wait(peek(h1))]
        t[0] = 7.0  # changed again, not broadcast: h1 and h2 still stand for theirs
        out += [wait(peek(h1)), wait(peek(h2))]
        u = np.full(100_000, 5.0)
        h3 = polybus.broadcast(u)  # its Put evicts the others at the replicas
        out += [wait(peek(h3)), wait(peek(h1)), wait(peek(h2)), wait(peek(h1))]
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = REPLICAS
    transport = "TRANSPORT"
    define.peek = { cache_bytes = "1MiB" }

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.peek" = "server.peek"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_a_handle_stands_for_the_bytes_as_they_were_broadcast(
        tmp_path: Path, transport: str, replicas: int) -> None:
    toml = TOML.replace("REPLICAS", str(replicas)).replace("TRANSPORT", transport)
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=toml)
    out = polybus.run(app, worker_output=None).result
    assert out == [0.0, 42.0, 0.0, 0.0, 42.0, 5.0, 0.0, 42.0, 0.0]


HARNESS_TOML = """
[modules.server]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.mul = { callstyle = "sync" }

[bind]
"client.mul" = "server.mul"
"""


def test_a_handle_keeps_its_content_at_the_replica_until_it_is_freed(tmp_path: Path) -> None:
    """Memory stays bounded: the content of a freed handle (whose array changed since) is
    dropped at the replica, as a freed cached array's is."""
    b = np.arange(1600.0).reshape(40, 40)
    before = b.copy()
    row = np.ones(40)
    with cluster(tmp_path, HARNESS_TOML) as c:
        s = c.session()
        (rt,) = c.runtimes
        first = polybus.broadcast(b)
        b[:] = 2.0
        second = polybus.broadcast(b)
        assert np.allclose(s.call("mul", (row, first), {}), row @ before)
        assert np.allclose(s.call("mul", (row, second), {}), row @ b)
        assert len(rt.cache) == 2
        del first
        gc.collect()
        assert np.allclose(s.call("mul", (row, second), {}), row @ b)  # carries the Drop
        assert len(rt.cache) == 1
        del second, b  # (b, alive, has the second's content: it keeps it named)
        gc.collect()
        s.call("mul", (row, row.reshape(40, 1)), {})
        assert len(rt.cache) == 0


def test_a_frozen_array_or_bytes_is_not_copied_by_its_handle(tmp_path: Path) -> None:
    """Content that cannot change is held by the handle as it is (no copy)."""
    b = np.arange(1600.0)
    b.flags.writeable = False
    data = bytes(100_000)
    with cluster(tmp_path, HARNESS_TOML) as c:
        c.session()
        assert polybus.broadcast(b).value is b
        assert polybus.broadcast(data).value is data


NESTED_CLIENT = """
    import numpy as np
    import polybus
    from polybus import use, wait

    first = use("first")

    def main(aggregate=False):
        a = np.arange(50_000.0)
        a.flags.writeable = False
        h = polybus.broadcast(a)
        return [wait(first([h], {"k": h})) for _ in range(3)]
"""

NESTED_SERVER = """
    import numpy as np

    def first(xs, d):
        return float(np.asarray(xs[0])[1] + np.asarray(d["k"])[2])
"""

NESTED_TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.first = { callstyle = "async" }

    [bind]
    "client.first" = "server.first"
"""


@pytest.mark.parametrize("aggregate", [False, True])
def test_a_handle_inside_a_list_or_dict_travels_as_a_reference(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, aggregate: bool) -> None:
    """A handle inside a container is named as one of its own is: the value went to the
    replica once, ahead of the calls (it went with each call, by value, until a new-user
    trial saw 3x the bytes; tests/integration/test_broadcast_nested.py has the rest)."""
    app = write_app(tmp_path, server=NESTED_SERVER, client=NESTED_CLIENT, toml=NESTED_TOML)
    sets = ['modules.client.use.first.aggregate=2'] if aggregate else []
    with caplog.at_level("WARNING", logger="polybus.client"):
        r = polybus.run(app, sets, worker_output=None)
    assert r.result == [3.0, 3.0, 3.0]
    assert not [m for m in caplog.messages if "broadcast" in m], caplog.messages
    assert r.bytes_sent < 2 * 400_000  # (the Put, and three calls of a few bytes)


LOCK_CLIENT = """
    import threading

    import polybus
    from polybus import use

    peek = use("peek")

    def main():
        h = polybus.broadcast({"lock": threading.Lock()})
        return peek(h)
"""


@pytest.mark.timeout(60)
def test_a_value_broadcast_cannot_send_is_said_at_the_broadcast_line_without_polybus_frames(
        tmp_path: Path) -> None:
    """A list (taken since: test_broadcast_values.py) used to be the program's own
    crash, `the client raised TypeError` with broadcast.py's frames; a value the codec
    cannot send is said as a usage error, at the program's line."""
    toml = TOML.replace("REPLICAS", "1").replace("TRANSPORT", "tcp")
    write_app(tmp_path, server=SERVER, client=LOCK_CLIENT, toml=toml)
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("polybus run: error: broadcast(...), at ['lock']: a value "
                               "of type lock cannot be sent at all "), p.stderr
    assert f'the broadcast at File "{tmp_path / "client.py"}", line 10, in main' in p.stderr
    assert "polybus/" not in p.stderr and "Traceback" not in p.stderr
