"""The read-only note blames a cached operand the function never wrote.

readonly.note adds "b is a cached operand ..." to any ValueError that says "read-only"
when any argument is a read-only array, whatever the write was into. A function that
fails writing into a read-only array of its own making (np.frombuffer over bytes), with
a cached operand among its arguments, is told to copy the operand. With
pool = "processes:N" the function's b is even a writable pickled copy in the child
(ForkingPickler uses protocol 4), so "b is read-only" is false there on both counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import numpy as np

    def own(a, b):
        c = np.frombuffer(bytes(8), dtype=np.float64)  # read-only: over bytes
        c[0] = 1.0
        return 0.0

    def writable(a, b):
        return bool(b.flags.writeable)
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteException

    own, writable = use("own"), use("writable")

    def main():
        a = np.ones(10)
        b = np.arange(100_000, dtype=np.float64)
        out = {"writable": wait(writable(a, b))}
        try:
            out["own"] = wait(own(a, b))
        except RemoteException as exc:
            out["own"] = exc.remote_message
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    define.own = {{ cache = ["b"], pool = {pool} }}
    define.writable = {{ cache = ["b"], pool = {pool} }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.own = {{ callstyle = "sync" }}
    use.writable = {{ callstyle = "sync" }}

    [bind]
    "client.own" = "server.own"
    "client.writable" = "server.writable"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pool", [
    "1",
    '"processes:1"'])
def test_a_write_into_the_functions_own_array_does_not_blame_the_cached_operand(
        tmp_path: Path, pool: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(pool=pool))
    out = polybus.run(app, worker_output=None).result
    assert out["own"] == "assignment destination is read-only"


PROCS_SERVER = """
    def scale(a, b):
        b *= 2
        return float(b.sum())

    def frozen(a, b):
        import numpy as np
        c = np.frombuffer(bytes(8), dtype=np.float64)
        c[0] = 1.0
"""

PROCS_CLIENT = """
    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteException

    scale, frozen = use("scale"), use("frozen")

    def main():
        a = np.ones(10)
        b = np.ones(100_000)
        out = {"scale": wait(scale(a, b)), "b": float(b.sum())}
        try:
            wait(frozen(a, b))
        except RemoteException as exc:
            out["frozen"] = exc.remote_message
        return out
"""

PROCS_TOML = """
    [modules.server]
    source = "server.py"
    define.scale = { cache = ["b"], pool = "processes:1" }
    define.frozen = { cache = ["b"], pool = "processes:1" }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.scale = { callstyle = "sync" }
    use.frozen = { callstyle = "sync" }

    [bind]
    "client.scale" = "server.scale"
    "client.frozen" = "server.frozen"
"""


@pytest.mark.timeout(60)
def test_in_a_process_pool_no_note_names_the_pools_own_parameters(tmp_path: Path) -> None:
    """The note named "args[1]" (the pool's call(*args, **kwargs)), and told the user
    to write args[1].copy(); the child's b is a writable copy (so scale works there)."""
    app = write_app(tmp_path, server=PROCS_SERVER, client=PROCS_CLIENT, toml=PROCS_TOML)
    out = polybus.run(app, worker_output=None).result
    assert out["scale"] == 200_000.0 and out["b"] == 100_000.0
    assert out["frozen"] == "assignment destination is read-only"
