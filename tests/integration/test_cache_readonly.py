"""A function that writes in place into a cached operand is told why it is read-only.

Found by a new-user pass: ``define.f = { cache = ["b"] }`` and ``b *= 2`` in f failed at
the client with numpy's bare "ValueError: output array is read-only" (or "assignment
destination is read-only"), nothing saying that b came from the operand cache, which
hands every call the same read-only array on purpose.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    def scale(a, b):
        b *= 2
        return float(a.sum() + b.sum())

    def poke(a, *, b):
        b[0] = 1.0
        return float(a.sum())

    def copies(a, b):
        b = b.copy()
        b *= 2
        return float(a.sum() + b.sum())

    def mine(a, b):
        import numpy as np
        c = np.broadcast_to(a, (2, len(a)))
        c[0, 0] = 1.0
        return 0.0
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait
    from polybus.errors import RemoteException

    scale, poke, copies, mine = use("scale"), use("poke"), use("copies"), use("mine")

    def main():
        a = np.ones(1000)
        b = np.arange(100_000, dtype=np.float64)
        out = {}
        for name, call in [("scale", lambda: scale(a, b)), ("poke", lambda: poke(a, b=b)),
                           ("copies", lambda: copies(a, b)), ("mine", lambda: mine(a, b))]:
            try:
                out[name] = ["ok", float(wait(call()))]
            except RemoteException as exc:
                out[name] = [exc.remote_type, exc.remote_message, str(exc)]
        out["b"] = float(b.sum())
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"
    define.scale = {{ cache = ["b"] }}
    define.poke = {{ cache = ["b"] }}
    define.copies = {{ cache = ["b"] }}
    define.mine = {{}}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.scale = {{ callstyle = "{style}"{extra} }}
    use.poke = {{ callstyle = "{style}" }}
    use.copies = {{ callstyle = "{style}"{extra} }}
    use.mine = {{ callstyle = "{style}" }}

    [bind]
    "client.scale" = "server.scale"
    "client.poke" = "server.poke"
    "client.copies" = "server.copies"
    "client.mine" = "server.mine"
"""

HINT = ("b is a cached operand: cached operands are read-only and "
        "shared between calls, so copy one before writing to it, e.g. b = b.copy()")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("transport", "style", "extra"), [
    ("tcp", "sync", ""), ("shm", "sync", ""), ("tcp", "async", ", aggregate = 4")])
def test_a_write_into_a_cached_operand_names_it_and_says_to_copy(
        tmp_path: Path, transport: str, style: str, extra: str) -> None:
    toml = TOML.format(transport=transport, style=style, extra=extra)
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=toml)
    out = polybus.run(app, worker_output=None).result
    b = float(sum(range(100_000)))
    assert out["copies"] == ["ok", 1000.0 + 2 * b]
    assert out["b"] == b
    kind, message, text = out["scale"]
    # The type and numpy's own words stay; the hint is added after them.
    assert (kind, message) == ("ValueError", f"output array is read-only ({HINT})")
    assert "b is a cached operand" in text and "cache" in text
    kind, message, _ = out["poke"]  # (passed by keyword)
    assert (kind, message) == ("ValueError", f"assignment destination is read-only ({HINT})")
    # A read-only array of the function's own making, with no cached argument: as it was.
    assert out["mine"][:2] == ["ValueError", "assignment destination is read-only"]
