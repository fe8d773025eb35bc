"""`polybus run --registry` takes back a worker restarted under its name: a looping
client whose only worker is SIGKILLed and started again by hand goes on with the new
process (client/rejoin.py), as `polybus serve` does (test_serve_revival.py).

The client's loop is driven by files: it makes call ``i`` once the test has written
``go-i``, and writes the answer to ``out-i``; so each kill and restart lands between two
calls, or while a call waits for a live replica, by the test's own order.
"""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time
from pathlib import Path

from integration.conftest import Procs, finish, read_line, start_registry

KV = '''\
import os


def stock(item):
    return os.getpid()
'''

CLIENT = '''\
import os
import time

from polybus import use

stock = use("stock")
stock_tcp = use("stock_tcp")  # (the same, over another transport: a second connection)


def again(f, i):
    return f(i)


def main(where, n):
    for i in range(n):
        go = os.path.join(where, f"go-{i}")
        deadline = time.monotonic() + 120
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{go} never came")
            time.sleep(0.01)
        pid = again(stock, i)
        assert again(stock_tcp, i) == pid
        with open(os.path.join(where, f"out-{i}.tmp"), "w") as f:
            f.write(str(pid))
        os.rename(os.path.join(where, f"out-{i}.tmp"), os.path.join(where, f"out-{i}"))
    return "done"
'''

TOML = '''\
[modules.kv]
source = "kv.py"
replication = 1
transport = "ipc"

[modules.client]
source = "client.py"
entrypoint = "main"
args = ["{where}", 3]
use.stock_tcp = {{ transport = "tcp" }}

[bind]
"client.stock" = "kv.stock"
"client.stock_tcp" = "kv.stock"

[cluster]
heartbeat = 0.25
'''


def _app(where: Path, client: str = CLIENT, toml: str = TOML) -> Path:
    (where / "kv.py").write_text(KV)
    (where / "client.py").write_text(textwrap.dedent(client))
    app = where / "app.toml"
    app.write_text(toml.format(where=where))
    return app


def kv_worker(procs: Procs, addr: str, app: Path, env: dict[str, str]
              ) -> subprocess.Popen[str]:
    """Worker kv-0 started by hand, once it serves."""
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "kv",
                    "--name", "kv-0", env=env)
    assert w.stderr is not None
    read_line(w.stderr, r"serving")
    return w


def _answer(where: Path, i: int, run: subprocess.Popen[str], timeout: float = 60.0) -> int:
    """Call ``i`` made (its go file written), and the pid that answered it; what the
    run said if it ended first."""
    (where / f"go-{i}").write_text("")
    out = where / f"out-{i}"
    deadline = time.monotonic() + timeout
    while not out.exists():
        if run.poll() is not None:
            _, err = finish(run, 10)
            raise AssertionError(f"the run ended before call {i} answered: {err}")
        assert time.monotonic() < deadline, f"call {i} not answered within {timeout:g} s"
        time.sleep(0.01)
    return int(out.read_text())


def test_a_run_takes_back_a_worker_started_again_under_its_name(
        procs: Procs, tmp_path: Path) -> None:
    """kv-0 SIGKILLed between two calls of a looping client and started again by hand:
    the client ended with `NoReplicaError: no live replica serves stock`, though the
    registry had the new kv-0. Now its later calls go to the new process; and a call
    made while no worker is live waits for one (--wait-for-workers bounds that wait).
    With a binding over another transport than its module's (TCP beside ipc): a sync
    call whose send found the lost worker's connection broken (its replica not yet known
    lost) was forgotten, neither run again nor failed, and the run waited for ever
    (client/alone.py); and the worker's coming back was said once per connection."""
    env = {"POLYBUS_TOKEN": "rejoin-token-" + "r" * 20}
    app = _app(tmp_path)
    addr, _ = start_registry(procs, env)

    def worker() -> subprocess.Popen[str]:
        return kv_worker(procs, addr, app, env)

    first = worker()
    figures = tmp_path / "figures.json"
    run = procs.start("run", app, "--registry", addr, "--quiet",
                      "--wait-for-workers", "60s", "--json", str(figures), env=env)
    assert _answer(tmp_path, 0, run) == first.pid
    first.send_signal(signal.SIGKILL)  # (by its own pid)
    first.wait(timeout=20)
    second = worker()  # registered under the lost one's name before the next call
    assert _answer(tmp_path, 1, run) == second.pid
    second.send_signal(signal.SIGKILL)
    second.wait(timeout=20)
    (tmp_path / "go-2").write_text("")  # the call waits for a live replica ...
    third = worker()  # ... which comes while it waits
    assert _answer(tmp_path, 2, run) == third.pid
    out, err = finish(run, 60)
    assert run.returncode == 0, err
    assert out.strip() == "done", (out, err)
    assert "replica kv-0 of module 'kv' was lost" in err, err
    # (said once a restart, not once more for the binding over TCP dialled again: its
    # two connections were said twice, servemix)
    assert err.count("replica kv-0 of module 'kv' is back: dialled again") == 2, err
    # Each process that served the run has its row: the two lost ones theirs, with the
    # call each answered (the rows were the links of the run's end alone: the summary
    # showed one call of three, and no loss).
    rows = [(r["name"], r["lost"], r["calls"]) for r in json.loads(figures.read_text())["replicas"]]
    # (two calls each: the call over the module's ipc and the one over TCP)
    assert sorted(rows) == [("kv-0", False, 2), ("kv-0", True, 2), ("kv-0", True, 2)], rows
