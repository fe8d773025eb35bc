"""A fresh frozen operand each round, of every layout naming must tell apart or treat
alike (C and Fortran order, views of a frozen array, 0-d and empty arrays, another byte
order, strings, a large array, the same content in a new array, an array changed and
frozen again), over two replicas: each call's replica computes with exactly the bytes
the program passed, and the operands are put and named as many times on both
transports (the quick path's Puts and Drops, client/quickname.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
    def show(i, b):
        return i, b.dtype.str, list(b.shape), b.tobytes()
"""
CLIENT = """
    import gc
    import numpy as np
    from polybus import use, wait
    show = use("show")

    def fz(x):
        x.flags.writeable = False
        return x

    def cases(r):
        base = np.arange(r, r + 24.0).reshape(4, 6)
        own = fz(np.arange(r, r + 48.0).reshape(8, 6))
        yield fz(base.copy())
        yield fz(np.asfortranarray(base))
        yield own[::2]
        yield own[:, 1:3]
        yield fz(np.array(float(r)))
        yield fz(np.zeros((0, 3)))
        yield fz(np.zeros((3, 0)))
        yield fz(base.astype(">f8"))
        yield fz(base.astype("i4"))
        yield fz(np.array(["ab", str(r)], dtype="U3"))
        yield fz(np.arange(3000.0) + r)
        yield fz(np.arange(3000.0))  # same content every round
        yield fz(np.ones(5))  # same content every round, freed between
        x = np.arange(6.0) + r
        x.flags.writeable = False
        yield x
        x.flags.writeable = True
        x[:] = -1 - r
        x.flags.writeable = False
        yield x

    def main():
        bad = []
        for r in range(6):
            for k, b in enumerate(cases(r)):
                want = (b.dtype.str, list(b.shape), b.tobytes())
                ps = [show(j, b) for j in range(4)]
                for p in ps:
                    i, dt, shape, data = wait(p)
                    if (dt, shape, data) != want:
                        bad.append((r, k, i, dt, shape, want[:2]))
                del ps
                gc.collect()
        return bad
"""
TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"
    replication = 2
    define.show = {{ cache = ["b"] }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.show = {{ callstyle = "async" }}

    [bind]
    "client.show" = "server.show"
"""

@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_each_replica_computes_with_the_bytes_passed(tmp_path: Path, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(transport=transport))
    p = cli("run", app, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "[]", p.stdout  # (no call saw other bytes)
    assert "client.show: 166 operands put, 194 named" in p.stdout + p.stderr
