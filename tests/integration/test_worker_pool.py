"""A replica's pool runs as many calls at once as it has threads, when that many wait.

Regression: the poller woke one thread per burst and nothing woke the rest, so a burst
of 8 calls on a pool of 8 ran about 2-3 at a time.
"""

from __future__ import annotations

from pathlib import Path

import polybus
from integration.conftest import write_app

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
