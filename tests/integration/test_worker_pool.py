"""A replica's pool runs as many calls at once as it has threads, when that many wait.

Regression: the poller woke one thread per burst and nothing woke the rest, so a burst
of 8 calls on a pool of 8 ran about 2-3 at a time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

# Its modules keep test records in globals over several replicas or processes, as
# meant: the note that each copy keeps its own (config/sharedstate.py) is not for them.
pytestmark = pytest.mark.filterwarnings("ignore:.*keeps state between calls")

SERVER = '''\
import threading
import time

_lock = threading.Lock()
_running = [0, 0]  # now, most at once


def slow(seconds):
    with _lock:
        _running[0] += 1
        _running[1] = max(_running[1], _running[0])
    time.sleep(seconds)
    with _lock:
        _running[0] -= 1
    return _running[1]
'''

CLIENT = '''\
from polybus import use, wait

slow = use("slow")


def main(n, seconds):
    return max(wait([slow(seconds) for _ in range(n)]))
'''

TOML = '''\
[modules.server]
source = "server.py"
define.slow = { pool = 8 }

[modules.client]
source = "client.py"
entrypoint = "main"
args = [8, 0.5]
use.slow = { callstyle = "async" }

[bind]
"client.slow" = "server.slow"
'''


def test_a_burst_fills_the_whole_pool(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    assert polybus.run(app).result == 8


MIXED_SERVER = SERVER + '''

import os

_per = {}  # interface -> [now, most at once]


def _held(name, seconds):
    with _lock:
        now = _per.setdefault(name, [0, 0])
        now[0] += 1
        now[1] = max(now[1], now[0])
    time.sleep(seconds)
    with _lock:
        now[0] -= 1
    return now[1], os.getpid()


def serial(seconds):
    return _held("serial", seconds)


def wide(seconds):
    return _held("wide", seconds)
'''

MIXED_CLIENT = '''\
from polybus import use, wait

serial = use("serial")
wide = use("wide")


def main(n, seconds):
    # (wide's first: a serial call past its own pool waits in the queue, not on a thread,
    # but the one serial call that runs takes a thread from wide's pool while it runs)
    w = wait([wide(seconds) for _ in range(n)] + [serial(seconds) for _ in range(n)])
    got, s = w[:n], w[n:]
    return {"serial": max(m for m, _ in s), "wide": max(m for m, _ in got),
            "serial_pids": len({p for _, p in s}), "wide_pids": len({p for _, p in got})}
'''


def _mixed(tmp_path: Path, serial: str, wide: str) -> dict[str, int]:
    app = write_app(tmp_path, server=MIXED_SERVER, client=MIXED_CLIENT, toml=f'''\
[modules.server]
source = "server.py"
define.serial = {{ pool = {serial} }}
define.wide = {{ pool = {wide} }}

[modules.client]
source = "client.py"
entrypoint = "main"
args = [8, 0.2]
use.serial = {{ callstyle = "async" }}
use.wide = {{ callstyle = "async" }}

[bind]
"client.serial" = "server.serial"
"client.wide" = "server.wide"
''')
    result: dict[str, int] = polybus.run(app).result
    return result


def test_each_interface_runs_at_most_its_own_pool_at_once(tmp_path: Path) -> None:
    # pool = 1 beside pool = 4 ran the first 4 at once (the replica's threads are the
    # largest pool): a function that is not thread-safe lost updates.
    got = _mixed(tmp_path, "1", "4")
    assert got["serial"] == 1 and got["wide"] == 4, got


def test_process_and_thread_interfaces_keep_their_own_kind_and_size(tmp_path: Path) -> None:
    # "processes:2" beside a thread pool of 4 started 4 children; a thread pool of 1
    # beside "processes:4" ran 4 at once.
    got = _mixed(tmp_path, '"processes:2"', "4")
    assert got["serial"] == 1 and got["serial_pids"] <= 2 and got["wide"] == 4, got
    assert got["wide_pids"] == 1  # (threads: the replica itself)
    got = _mixed(tmp_path, "1", '"processes:4"')
    assert got["serial"] == 1 and got["serial_pids"] == 1, got
    assert got["wide_pids"] >= 2, got
