"""A frozen cached operand that a call then passed writable is hashed again once it is
frozen again, whatever its change touched.

Found by a review: the name of an array read-only through and through is remembered,
with a sample of its bytes (client/refrozen.py). A call that passed the same array made
writable again hashed it (a writable array is hashed at each call) and, its bytes still
the same, kept the remembered name as the name of a frozen array. The program then
changed it where the sample does not look, froze it again, and the next call named it
by the remembered name: the replica computed with the old bytes, silently, though a call
had seen the array writable (what strategies.md, ``cache``, says makes it hashed at
each call).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_bound_app

SERVER = """
    def total(b):
        return float(b.sum())
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait

    total = use("total")

    def main():
        b = np.zeros(100_000)  # (a sample of 64 elements: b[1] is none of them)
        b.flags.writeable = False
        out = [wait(total(b))]
        b.flags.writeable = True
        out.append(wait(total(b)))  # writable, its bytes unchanged
        b[1] = 1.0
        b.flags.writeable = False
        out.append(wait(total(b)))
        return out
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", ["sync", "async"])
def test_an_operand_seen_writable_is_hashed_once_frozen_again(tmp_path: Path,
                                                              style: str) -> None:
    app = write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("total",),
                          server_keys='define.total = { cache = ["b"] }',
                          client_keys=f'use.total = {{ callstyle = "{style}" }}')
    r = polybus.run(app, worker_output=None)
    assert r.result == [0.0, 0.0, 1.0]
