"""`polybus serve` gets lost replicas back: one taken for dead while a call held its
GIL (its process alive), and one replaced by a new worker registered by hand.

Behaviour only: each test asks until the front door answers again, within a bound.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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


@dataclass
class _AfterTheLastDied:
    """What two serves at one registry did once its one worker (started by hand) died
    and another registered: one plain, one given ``--wait-for-workers 30s``."""

    a: int                           # the first worker's pid
    b: int                           # the one registered after it died
    plain_before: set[int]           # who answered the plain serve, then the told one
    told_before: set[int]
    bye: int                         # the plain serve's answer to the request that killed it
    a_status: int | None             # how the first worker ended
    plain_none: int                  # the plain serve's answer with none registered
    plain_after: set[int]            # who answered the plain serve once b registered
    told_got: list[tuple[int, bytes]]  # the told serve's answer, asked with none registered


@pytest.fixture(scope="module")
def after_the_last_died(tmp_path_factory: pytest.TempPathFactory
                        ) -> Iterator[_AfterTheLastDied]:
    """One registry, one worker, two serves: both tests below look at one run of it
    (each waits out 5 s or more with nothing registered; side by side, not in turn).
    /bye is not idempotent here: its 502 comes at once, where a call lost with every
    replica waits 5 s in its backlog for one to come back (the waits for a replica
    that these tests are about are /pid's)."""
    env = {"POLYBUS_TOKEN": "revival-token-" + "z" * 20}
    app = _app(tmp_path_factory.mktemp("after_the_last_died"), 1)
    app.write_text(app.read_text().replace(
        "replication = 1\n", "replication = 1\ndefine.bye = { idempotent = false }\n"
        "define.pid = {}\ndefine.gil = {}\n"))
    procs = Procs()
    try:
        addr, _ = start_registry(procs, env)
        a = _by_hand(procs, addr, app, "web-A", env)
        host, plain, _ = _listening(procs, app, "--registry", addr, env=env)
        _, told, _ = _listening(procs, app, "--registry", addr, "--wait-for-workers", "30s",
                                env=env)
        told_err = procs.started[-1].stderr
        assert told_err is not None
        plain_before, told_before = _pids_until(host, plain, 1), _pids_until(host, told, 1)
        bye = _get(host, plain, "/bye")[0]
        a_status = a.wait(timeout=20)
        read_line(told_err, r"replica web-A of module 'web' was lost", timeout=30)
        got: list[tuple[int, bytes]] = []
        asking = threading.Thread(target=lambda: got.append(_get(host, told, "/pid")),
                                  daemon=True)
        asking.start()
        asked_at = time.monotonic()
        plain_none = _get(host, plain, "/pid")[0]  # (waited 5 s, as a run at a registry)
        # The next registers past the 5 s serve --wait-for-workers waited before, and
        # after the plain serve's answer: no time is asserted.
        time.sleep(max(0.0, asked_at + 5.5 - time.monotonic()))
        b = _by_hand(procs, addr, app, "web-B", env)
        asking.join(timeout=60)
        yield _AfterTheLastDied(a.pid, b.pid, plain_before, told_before, bye, a_status,
                                plain_none, _pids_until(host, plain, 1), got)
    finally:
        procs.close()


def test_serve_with_a_registry_uses_a_worker_registered_after_the_last_one_died(
        after_the_last_died: _AfterTheLastDied) -> None:
    """Its one worker (started by hand) killed by a request, serve answered 502 for
    good, even once a new worker of the module had registered."""
    run = after_the_last_died
    assert run.plain_before == {run.a}
    assert run.bye == 502
    assert run.a_status == 3
    assert run.plain_none == 502  # none registered yet
    assert run.plain_after == {run.b}


def test_serve_with_a_registry_waits_as_long_as_wait_for_workers_says(
        after_the_last_died: _AfterTheLastDied) -> None:
    """`serve --registry ... --wait-for-workers 30s`: a request that finds no live
    replica waits up to that long for one to register (here one started 5.5 s after it
    was made), as `run --registry` waits the longer of 5 s and that flag; serve waited
    5 s flat and answered 502."""
    run = after_the_last_died
    assert run.told_before == {run.a}
    got = run.told_got
    assert got and got[0][0] == 200, got
    assert json.loads(got[0][1])["pid"] == run.b
