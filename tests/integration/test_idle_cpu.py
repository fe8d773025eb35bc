"""Spin, then block: a replica that has just answered polls for a short window and then
sleeps, so once its client goes quiet it burns no CPU (transport/spinning.py). The
check is of behaviour, not speed: a replica still polling would use most of a CPU
over the idle second; a sleeping one uses next to none (its standby thread and
heartbeat wake now and then)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import os

    def pid():
        return os.getpid()

    def echo(x):
        return x
"""

CLIENT = """
    import os
    import time

    from polybus import use

    pid = use("pid")
    echo = use("echo")

    def _cpu(p):
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def main(calls):
        worker = pid()
        for i in range(calls):
            assert echo(i) == i
        time.sleep(0.3)          # past any spin window
        before = _cpu(worker)
        time.sleep(1.0)          # idle: nothing is sent
        return _cpu(worker) - before
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "{transport}"
    {spin}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [2000]
    use.pid = {{ callstyle = "sync" }}
    use.echo = {{ callstyle = "{style}" }}

    [bind]
    "client.pid" = "server.pid"
    "client.echo" = "server.echo"
"""


@pytest.mark.parametrize(("transport", "spin"), [
    ("tcp", ""), ("shm", ""), ("tcp", 'spin = "5ms"'), ("ipc", 'spin = "0"'),
    ("shm", 'coalesce = "1ms"')])
def test_a_replica_left_idle_after_a_burst_of_calls_sleeps(
        tmp_path: Path, transport: str, spin: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(transport=transport, spin=spin, style="sync"))
    idle_cpu_s = polybus.run(app).result
    assert 0.0 <= idle_cpu_s < 0.25, f"replica used {idle_cpu_s:.2f} s of CPU while idle"


BURSTS = CLIENT.replace("from polybus import use", "from polybus import use, wait").replace(
    """        for i in range(calls):
            assert echo(i) == i
""", """        for _ in range(calls // 100):  # bursts: answers held while more calls wait
            got = [echo(i) for i in range(100)]
            assert [wait(p) for p in got] == list(range(100))
""")


def test_a_replica_left_idle_after_holding_answers_back_sleeps(tmp_path: Path) -> None:
    # (answers corked and bells held at the client's `coalesce`, worker/replies.py and
    # bells.py: what is held tells the standby when to look, standby.py; once all is let
    # go, it looks as seldom as ever)
    assert BURSTS != CLIENT
    app = write_app(tmp_path, server=SERVER, client=BURSTS, toml=TOML.format(
        transport="shm", spin='coalesce = "1ms"', style="async"))
    idle_cpu_s = polybus.run(app).result
    assert 0.0 <= idle_cpu_s < 0.25, f"replica used {idle_cpu_s:.2f} s of CPU while idle"
