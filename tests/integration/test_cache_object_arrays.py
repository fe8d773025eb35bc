"""An array of Python objects (``dtype=object``) has no content to name: cached, it goes
by value, uncached, and the call works (or fails) exactly as it does without ``cache``;
``broadcast`` refuses one with a message that says so.

Found by a new-user trial: with ``define.n = { cache = ["b"] }`` (pickle on) a call
passing an object array failed with numpy's "Cannot change data-type for array of
references." (the client tried to hash its bytes, which are references), and
``polybus.broadcast`` of one failed with that message from deep in naming.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.errors import UnsendableError, UsageError
from polybus.testing.apps import write_app

from .comm_harness import cluster

SERVER = """
    def n(b):
        return len(b)
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait

    n = use("n")

    def main():
        small = np.array(["a", 1], dtype=object)
        big = np.array([object()] * 10_000, dtype=object)  # 80 KB of references
        nums = np.zeros(10_000)
        out = [n(small), n(b=small), n(big), n(nums), n(big), n(nums)]
        return [wait(p) for p in out]
"""

TOML = """
    [modules.server]
    source = "server.py"
    PICKLE
    define.n = { cache = CACHE }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.n = USE

    [bind]
    "client.n" = "server.n"
"""

STYLES = {"sync": '{ callstyle = "sync" }', "async": '{ callstyle = "async" }',
          "aggregated": '{ callstyle = "async", aggregate = 4 }'}


def _app(tmp_path: Path, cache: str, style: str, pickle: bool) -> Path:
    toml = (TOML.replace("CACHE", cache).replace("USE", STYLES[style])
            .replace("PICKLE", "pickle = true" if pickle else ""))
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=toml)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("cache", ['["b"]', '"auto"'], ids=["named", "auto"])
def test_a_cached_object_array_goes_by_value(tmp_path: Path, cache: str, style: str) -> None:
    r = polybus.run(_app(tmp_path, cache, style, pickle=True), worker_output=None)
    assert r.result == [2, 2, 10_000, 10_000, 10_000, 10_000]
    # The array of numbers (80 KB) is still cached: sent once, not twice (the object
    # arrays, ~20 KB pickled, go with each of their calls; ~121 KB in all, uncached ~201).
    assert r.bytes_sent < 2 * 80_000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cache", ["[]", '["b"]'], ids=["uncached", "cached"])
def test_without_pickle_the_error_is_the_uncached_one(tmp_path: Path, cache: str) -> None:
    with pytest.raises(UnsendableError, match=r"dtype object .* cannot be sent by the safe codec"):
        polybus.run(_app(tmp_path, cache, "sync", pickle=False), worker_output=None)


HARNESS_TOML = """
[modules.server]
source = "server.py"
pickle = true

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.echo" = "server.echo"
"""


def test_broadcast_of_an_object_array_says_it_cannot(tmp_path: Path) -> None:
    with cluster(tmp_path, HARNESS_TOML) as c:
        c.session()
        with pytest.raises(UsageError, match=r"broadcast\(\) .*dtype=object"):
            polybus.broadcast(np.array([object()], dtype=object))
        structured = np.zeros(3, dtype=[("x", "f8"), ("o", "O")])
        with pytest.raises(UsageError, match=r"broadcast\(\) .*dtype=object"):
            polybus.broadcast(structured)


BROADCAST_CLIENT = """
    import numpy as np
    import polybus

    def main():
        h = polybus.broadcast(np.array([object()], dtype=object))
        return h
"""


@pytest.mark.timeout(60)
def test_a_refused_broadcast_is_placed_at_the_broadcast_line(tmp_path: Path) -> None:
    """The run names the program's line as a broadcast (it used to read "the call whose
    answer was used", as for a promise)."""
    toml = (TOML.replace("CACHE", "[]").replace("USE", STYLES["sync"])
            .replace("PICKLE", "pickle = true"))
    app = write_app(tmp_path, server=SERVER, client=BROADCAST_CLIENT, toml=toml)
    with pytest.raises(UsageError) as e:
        polybus.run(app, worker_output=None)
    assert "dtype=object" in str(e.value)
    assert f'the broadcast at File "{tmp_path / "client.py"}", line 6, in main' in str(e.value)
