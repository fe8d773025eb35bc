"""A frozen cached operand made writable, changed and frozen again is named anew.

Found by a new-user trial: ``define.rows_times = { cache = ["b"] }``, a program that
froze ``b``, called, made it writable, changed it, froze it again and called again got
the old ``b``'s result, silently: its name was remembered from the first call, so a
replica that held it computed with the old bytes, and over ``shm`` a replica sent a
``Put`` of it got the old bytes too (the process's shelf keeps a segment's content by
name). The client now checks a sample of a remembered array's bytes at each call
(client/refrozen.py); this change touches every element, so it is seen, the array is
hashed again and the program is warned once per array.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
    def rows_times(a_rows, b, start):
        return start, a_rows @ b
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait

    rows_times = use("rows_times")

    def changed(x, value):
        x.flags.writeable = True
        x[:] = value
        x.flags.writeable = False

    def main(n=300):
        a = np.ones((10, n))
        b = np.zeros((n, n))
        b.flags.writeable = False
        out = [wait(rows_times(a, b, 0))[1][0, 0]]
        for value in (1.0, 2.0):  # changed twice: said once
            changed(b, value)
            out.append(wait(rows_times(a, b, 1))[1][0, 0])
        c = np.zeros((n, n))  # a view sliced afresh for each call: named per place
        c.flags.writeable = False
        out.append(wait(rows_times(a, c[:, :100], 2))[1][0, 0])
        changed(c, 3.0)
        out.append(wait(rows_times(a, c[:, :100], 3))[1][0, 0])
        return [float(x) for x in out]
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"
    replication = {replication}
    define.rows_times = {{ cache = ["b"] }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.rows_times = {{ callstyle = "async" }}

    [bind]
    "client.rows_times" = "server.rows_times"
"""

SAID = "polybus: warning: a frozen array"


@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize("replication", [1, 2])
def test_a_refrozen_operand_is_sent_as_it_is_now(tmp_path: Path, transport: str,
                                                 replication: int) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(transport=transport, replication=replication))
    p = cli("run", app, "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[0.0, 300.0, 600.0, 0.0, 900.0]", p.stderr
    said = [ln for ln in p.stderr.splitlines() if ln.startswith(SAID)]
    assert len(said) == 2, p.stderr  # once for b, once for c (whose view was passed)
    assert all("(float64, shape (300, 300))" in ln and "changed after it was frozen" in ln
               for ln in said), said
