"""A call of an interface that asked for nothing, refused by the one queue that
``--set ...define.work.overflow=reject`` made rejecting, fails with a BusyError saying
so (worker/options.py `full_text`), and `polybus run` names the type.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_bound_app

SERVER = """
import time

def work(t):
    time.sleep(t)
    return t

def stage1(x):
    return x
"""
CLIENT = """
import time

from polybus import use

work, stage1 = use("work"), use("stage1")

def main():
    running = work(1.5)  # (taken by the replica's one handler)
    time.sleep(0.3)
    waiting = work(1.5)  # (the queue of 1 is full)
    time.sleep(0.3)
    return stage1(1), running, waiting
"""


@pytest.mark.timeout(60)
def test_a_refused_call_of_another_interface_names_the_define_and_the_type(
        tmp_path: Path) -> None:
    write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("work", "stage1"),
                    server_keys="replication = 1",
                    client_keys='use.work = { callstyle = "async" }')
    p = cli("run", "app.toml", "--set", "modules.server.define.work.queue=1",
            "--set", "modules.server.define.work.overflow=reject", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert ("polybus run: error: BusyError: server-0: queue of 1 call is full; the replica "
            "has one queue for all its interfaces, and a call of stage1 is refused too: the "
            "queue takes its bound (queue = 1) and overflow = \"reject\" from define.work\n"
            ) in p.stderr, p.stderr
