"""`polybus serve` gets lost replicas back: one taken for dead while a call held its
GIL (its process alive), and one replaced by a new worker registered by hand.

Behaviour only: each test asks until the front door answers again, within a bound.
"""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

from integration.conftest import Procs, descendants, read_line, start_registry
from integration.test_silent_replicas import GIL

# The GIL held 2 s, not the run's 4: still eight heartbeats of silence (three make a
# replica taken for dead), and both are back while the revival's looks are still close
# together (they were 10 s apart by the time a 4 s hold ended under load).
_GIL_2S = GIL.replace("def gil(secs=4.0):", "def gil(secs=2.0):")
assert _GIL_2S != GIL

WEB = _GIL_2S + '''

import os


def pid():
    return {"pid": os.getpid()}


def bye():
    os._exit(3)
'''

TOML = '''\
[modules.web]
source = "web.py"
replication = {replication}

[cluster]
heartbeat = 0.25

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /pid" = "web.pid"
"GET /gil" = "web.gil"
"GET /bye" = "web.bye"
'''


def _app(where: Path, replication: int) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "web.py").write_text(textwrap.dedent(WEB))
    app = where / "app.toml"
    app.write_text(TOML.format(replication=replication))
    return app


def _get(host: str, port: int, url: str) -> tuple[int, bytes]:
    status, body, _ = _get_with_headers(host, port, url)
    return status, body


def _get_with_headers(host: str, port: int, url: str) -> tuple[int, bytes, dict[str, str]]:
    c = http.client.HTTPConnection(host, port, timeout=60)
    try:
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.read(), dict(r.getheaders())
    finally:
        c.close()


def _pids_until(host: str, port: int, want: int, timeout: float = 60.0) -> set[int]:
    """The worker pids that answer /pid, asked until ``want`` distinct ones did or
    ``timeout`` s passed; what a failing ask said, if none came."""
    import json

    seen: set[int] = set()
    last = b""
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        status, body = _get(host, port, "/pid")
        if status == 200:
            seen.add(json.loads(body)["pid"])
        else:
            last = body
            time.sleep(0.2)
    assert len(seen) >= want, f"only {seen} answered within {timeout:g} s; last: {last!r}"
    return seen


def _listening(procs: Procs, *args: str | Path, env: dict[str, str] | None = None
               ) -> tuple[str, int, int]:
    p = procs.start("serve", *args, env=env)
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    return m.group(1), int(m.group(2)), p.pid


def test_replicas_taken_for_dead_for_a_gil_holding_call_serve_again(
        procs: Procs, tmp_path: Path) -> None:
    """Both replicas were taken for dead (the call re-ran on the second) and every
    route answered 502 "no live replica" for good, the workers alive and idle. They are
    dialled again and serve again: the same processes, not new ones."""
    host, port, pid = _listening(procs, _app(tmp_path, 2))
    workers = descendants(pid)
    procs.watch(workers)
    before = _pids_until(host, port, 2)
    assert before <= workers
    status, body = _get(host, port, "/gil")
    assert status == 502, body
    assert b"taken for dead while its process may be alive" in body, body
    assert b"cluster.heartbeat" in body, body
    assert b"modules.web.define.gil.idempotent = false" in body, body
    assert b"@http.idempotent" not in body and b"may be what ends them" not in body, body
    assert _pids_until(host, port, 2) == before  # both back, the same processes
    assert descendants(pid) == workers  # and none started meanwhile


def _by_hand(procs: Procs, addr: str, app: Path, name: str, env: dict[str, str]
             ) -> subprocess.Popen[str]:
    """A worker of module web started by hand at the registry ``addr``, once serving."""
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "web",
                    "--name", name, env=env)
    assert w.stderr is not None
    read_line(w.stderr, r"serving .*pid@http")
    return w


def test_serve_with_a_registry_uses_a_worker_registered_after_the_last_one_died(
        procs: Procs, tmp_path: Path) -> None:
    """Its one worker (started by hand) killed by a request, serve answered 502 for
    good, even once a new worker of the module had registered."""
    env = {"POLYBUS_TOKEN": "revival-token-" + "z" * 20}
    app = _app(tmp_path, 1)
    addr, _ = start_registry(procs, env)
    a = _by_hand(procs, addr, app, "web-A", env)
    host, port, _ = _listening(procs, app, "--registry", addr, env=env)
    assert _pids_until(host, port, 1) == {a.pid}
    assert _get(host, port, "/bye")[0] == 502
    assert a.wait(timeout=20) == 3
    assert _get(host, port, "/pid")[0] == 502  # none registered yet
    b = _by_hand(procs, addr, app, "web-B", env)
    assert _pids_until(host, port, 1) == {b.pid}


def test_serve_with_a_registry_waits_as_long_as_wait_for_workers_says(
        procs: Procs, tmp_path: Path) -> None:
    """`serve --registry ... --wait-for-workers 30s`: a request that finds no live
    replica waits up to that long for one to register (here 6.5 s after it was made),
    as `run --registry` waits the longer of 5 s and that flag; serve waited 5 s flat
    and answered 502."""
    env = {"POLYBUS_TOKEN": "revival-token-" + "w" * 20}
    app = _app(tmp_path, 1)
    addr, _ = start_registry(procs, env)
    a = _by_hand(procs, addr, app, "web-A", env)
    host, port, _ = _listening(procs, app, "--registry", addr, "--wait-for-workers", "30s",
                               env=env)
    assert _pids_until(host, port, 1) == {a.pid}
    a.send_signal(signal.SIGKILL)  # (by its own pid)
    a.wait(timeout=20)
    got: list[tuple[int, bytes]] = []
    asking = threading.Thread(target=lambda: got.append(_get(host, port, "/pid")), daemon=True)
    asking.start()
    time.sleep(6.5)  # (past the 5 s serve waited before; no time is asserted)
    b = procs.start("worker", "--registry", addr, "--config", app, "--as", "web",
                    "--name", "web-B", env=env)
    asking.join(timeout=60)
    assert got and got[0][0] == 200, got
    assert json.loads(got[0][1])["pid"] == b.pid
