"""A worker of two connections (a binding over another transport than its module's)
lost once and started again is said lost once and back once, whichever connection
finds the loss first (client/lossline.py, client/revive.py).

The client's loop is driven by files as in test_run_rejoin.py; its interface is not
idempotent and the client calls again a call that failed with its replica, so nothing
reads the second connection between the first one's loss and its dialling again.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from integration.conftest import Procs, finish, start_registry
from integration.test_run_rejoin import CLIENT as REJOIN_CLIENT
from integration.test_run_rejoin import TOML as REJOIN_TOML
from integration.test_run_rejoin import _answer, _app, kv_worker

# test_run_rejoin.py's client, which makes a call again after its replica's loss, and
# its configuration, whose `stock` is not idempotent (so the first call fails)
CLIENT = REJOIN_CLIENT.replace(
    "from polybus import use", "from polybus import WorkerDiedError, use").replace(
    "def again(f, i):\n    return f(i)",
    "def again(f, i):\n    try:\n        return f(i)\n"
    "    except WorkerDiedError:  # (not idempotent: its replica went with it)\n"
    "        return f(i)")
TOML = REJOIN_TOML.replace(
    'transport = "ipc"\n', 'transport = "ipc"\ndefine.stock = {{ idempotent = false }}\n'
).replace('args = ["{where}", 3]', 'args = ["{where}", 2]')
assert "except WorkerDiedError" in CLIENT and "idempotent" in TOML and '", 2]' in TOML


def test_a_worker_lost_once_is_said_lost_once_and_back_once(
        procs: Procs, tmp_path: Path) -> None:
    """kv-0 SIGKILLed between two calls and started again: its ipc connection's loss
    was said, kv-0 dialled again over ipc and said back; then its TCP connection, to the
    process killed, found broken, was said lost a second time, and back a second time,
    for one loss and one restart."""
    env = {"POLYBUS_TOKEN": "rejoin-token-" + "r" * 20}
    app = _app(tmp_path, CLIENT, TOML)
    addr, _ = start_registry(procs, env)

    def worker() -> subprocess.Popen[str]:
        return kv_worker(procs, addr, app, env)

    first = worker()
    run = procs.start("run", app, "--registry", addr, "--quiet",
                      "--wait-for-workers", "60s", env=env)
    assert _answer(tmp_path, 0, run) == first.pid
    first.send_signal(signal.SIGKILL)  # (by its own pid)
    first.wait(timeout=20)
    second = worker()
    assert _answer(tmp_path, 1, run) == second.pid
    out, err = finish(run, 60)
    assert run.returncode == 0, err
    assert out.strip() == "done", (out, err)
    assert err.count("replica kv-0 of module 'kv' was lost") == 1, err
    assert err.count("replica kv-0 of module 'kv' is back: dialled again") == 1, err
