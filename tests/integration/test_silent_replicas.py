"""A replica taken for dead because a call held its GIL past three heartbeats (its
process alive all along): what the run says names the cause and the keys that help.

Behaviour only: the call holds the GIL for many heartbeats (one C call that sleeps with
the GIL held: wall time, however loaded the machine is; a `sum` sized to the machine
by a calibration ran short when the calibration was slowed by other work), so the
replica cannot answer a Ping.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from integration.conftest import cli

GIL = '''\
import ctypes
import time


def gil(secs=4.0):
    """Holds the GIL for ``secs`` s of wall time: one C call made with the GIL held (a
    PyDLL's: ctypes releases it for a CDLL's), as a long loop in a C extension would."""
    t = time.perf_counter()
    ctypes.PyDLL(None).usleep(int(secs * 1_000_000))
    return round(time.perf_counter() - t, 2)
'''

CLIENT = '''\
from polybus import use

gil = use("gil")


def main():
    return gil(2.0)  # (eight heartbeats of 0.25 s: three make it taken for dead)
'''

RUN_TOML = '''\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.gil" = "server.gil"

[cluster]
heartbeat = 0.25
'''


def test_replicas_taken_for_dead_while_a_call_holds_the_gil_name_cluster_heartbeat(
        tmp_path: Path) -> None:
    """The call is re-run on the second replica, which goes the same way. The error said
    the call "may be what ends them" (they were alive) and named a key `check` refuses
    (``define.gil.idempotent``, no module): it now says they were taken for dead for
    their silence, names ``cluster.heartbeat`` and the whole idempotent key."""
    (tmp_path / "server.py").write_text(textwrap.dedent(GIL))
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "app.toml").write_text(RUN_TOML)
    p = cli("run", tmp_path / "app.toml", "--quiet", timeout=120)
    assert p.returncode == 2, p.stderr
    err = p.stderr
    assert "every replica of gil is gone" in err, err
    assert "taken for dead while its process may be alive" in err, err
    assert "raise cluster.heartbeat (now 0.25 s)" in err, err
    assert "docs/reliability.md" in err, err
    assert "modules.server.define.gil.idempotent = false stops that" in err, err
    assert "may be what ends them" not in err, err
    # the warning said as each replica went names the fix too
    assert err.count("raise cluster.heartbeat for such calls") == 2, err
