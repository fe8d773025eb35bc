"""A numpy masked array as an argument: refused with an UnsendableError naming it, small
or large enough to go as a cached operand (cache = "auto"); with pickle on, it arrives
masked. It had arrived as a plain array, the fill value in place of its masked data."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import numpy as np

    def f(x):
        return [type(x).__name__, np.ma.getmaskarray(x).tolist()[:2]]
"""
CLIENT = """
    import numpy as np
    from polybus import use

    f = use("f")

    def main():
        out = []
        for n in (2, 20000):  # (the large one: a cached operand, 160 kB)
            a = np.ma.array(np.arange(float(n)), mask=np.arange(n) % 2)
            try:
                out.append(f(a))
            except TypeError as exc:
                out.append([type(exc).__name__, str(exc)])
        return out
"""
TOML = """
    [modules.server]
    source = "server.py"
    pickle = {pickle}
    define.f = {{ cache = "auto" }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.f" = "server.f"
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pickle", ["false", "true"])
def test_a_masked_array_is_refused_or_arrives_masked(tmp_path: Path, pickle: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(pickle=pickle))
    out = polybus.run(app, worker_output=False).result
    if pickle == "true":
        assert out == [["MaskedArray", [False, True]]] * 2
        return
    for kind, text in out:
        assert kind == "UnsendableError"
        assert text.startswith("f(...) argument 1: a numpy masked array")
        assert ".data and .mask" in text and ".filled(value)" in text
