"""`polybus serve`: real HTTP requests on 127.0.0.1 through the front door to workers.

Behaviour only: statuses, bodies, the server serving on after each failure, the
pool/queue overflow policy, and every process gone after SIGTERM.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from integration.conftest import (
    EXAMPLES,
    Procs,
    cli,
    descendants,
    env_with,
    kill_all,
    read_line,
    rest_of,
    start_registry,
    wait_gone,
)

WEB = '''\
import os
import time


def hello():
    return "hello"


def info(method, path, query, headers, body, subpath):
    return {"method": method, "path": path, "query": query, "body": len(body),
            "subpath": subpath, "agent": headers.get("user-agent")}


def boom(query):
    raise ValueError("bad thing: " + query.get("why", "?"))


def slow(query):
    if os.environ.get("MARK"):  # (the test waits for the call to have begun)
        open(os.environ["MARK"], "w").close()
    time.sleep(float(query.get("s", "0.3")))
    return (201, {"X-Slow": "yes"}, "done")
'''

TOML = '''\
[modules.web]
source = "web.py"
replication = 1
# pool and queue are a replica's: the largest any of its interfaces asks for
define.hello = {{ queue = {queue} }}
define.info = {{ queue = {queue} }}
define.boom = {{ queue = {queue} }}
define.slow = {{ pool = 1, queue = {queue}, overflow = "{overflow}" }}

[serve]
listen = "127.0.0.1:0"
max_body = "1KiB"
tracebacks = {tracebacks}

[serve.routes]
"GET /" = "web.hello"
"/info/*" = "web.info"
"GET /boom" = "web.boom"
"GET /slow" = "web.slow"
"GET /late" = {{ to = "web.slow", timeout = "0.2s" }}
'''


def start(procs: Procs, where: Path, overflow: str = "block", tracebacks: bool = False,
          queue: int = 1000, env: dict[str, str] | None = None) -> tuple[str, int, int]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "web.py").write_text(textwrap.dedent(WEB))
    app = where / "app.toml"
    app.write_text(TOML.format(overflow=overflow, tracebacks=str(tracebacks).lower(),
                               queue=queue))
    p = procs.start("serve", app, env=env)
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    return m.group(1), int(m.group(2)), p.pid


def get(conn: http.client.HTTPConnection, method: str, url: str,
        body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    conn.request(method, url, body=body)
    r = conn.getresponse()
    return r.status, dict(r.getheaders()), r.read()


def raw(host: str, port: int, data: bytes) -> bytes:
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_serve_answers_and_keeps_serving_after_every_failure(procs: Procs, tmp_path: Path) -> None:
    host, port, pid = start(procs, tmp_path)
    conn = http.client.HTTPConnection(host, port, timeout=30)

    def still_ok() -> None:
        fresh = http.client.HTTPConnection(host, port, timeout=30)
        assert get(fresh, "GET", "/")[::2] == (200, b"hello")
        fresh.close()

    status, headers, body = get(conn, "GET", "/")
    assert (status, body) == (200, b"hello")
    assert headers["Content-Type"].startswith("text/plain")
    status, headers, body = get(conn, "POST", "/info/a%20b?x=1&y=2", b"abc")  # same connection
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"method": "POST", "path": "/info/a b", "query": {"x": "1", "y": "2"},
                                "body": 3, "subpath": "/a b", "agent": None}

    status, _, body = get(conn, "GET", "/nowhere")
    assert status == 404 and b"no route for GET /nowhere" in body
    status, headers, _ = get(conn, "DELETE", "/boom")
    assert status == 405 and headers["Allow"] == "GET, HEAD"  # (a GET route serves HEAD)
    status, _, body = get(conn, "GET", "/boom?why=testing")
    assert status == 500 and b"ValueError: bad thing: testing" in body
    assert b"remote traceback" not in body and b"in boom" not in body
    status, headers, body = get(conn, "GET", "/slow?s=0")
    assert (status, headers["X-Slow"], body) == (201, "yes", b"done")
    status, _, body = get(conn, "GET", "/late?s=0.5")
    assert status == 504 and b"0.2 s" in body and b"GET /late" in body, body  # (given up
    # at once: the promise was not waited for on the event loop)
    still_ok()

    status, _, body = get(conn, "POST", "/info/x", b"x" * 2000)
    assert status == 413
    conn.close()
    still_ok()
    assert raw(host, port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")
    still_ok()
    big_head = b"GET / HTTP/1.1\r\nX: " + b"a" * 100_000 + b"\r\n\r\n"
    assert raw(host, port, big_head).startswith(b"HTTP/1.1 431 ")
    still_ok()
    pipelined = raw(host, port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\nHEAD / HTTP/1.1\r\nHost: h\r\n\r\n"
                                b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                                b"GET /info/p HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert pipelined.count(b"HTTP/1.1 200 OK") == 4 and pipelined.count(b"hello") == 2
    assert pipelined.count(b"Connection: keep-alive\r\n") == 1  # told to the 1.0 request

    workers = descendants(pid)
    assert workers, "the local engine's worker runs under polybus serve"
    procs.watch(workers)
    proc = procs.started[-1]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143  # (terminated, as reliability.md says)
    assert not wait_gone(workers)
    assert proc.stderr is not None
    said = rest_of(proc.stderr)
    # Each failed call's error became its response (the 504 too): none is said unseen.
    assert "never looked at" not in said, said


def test_a_request_past_its_timeout_is_its_504_and_not_said_unseen(procs: Procs,
                                                                     tmp_path: Path) -> None:
    """The 504 is how a timed-out call's error is looked at: stopping serve while its
    call still runs (its answer not come) said it had never been looked at."""
    host, port, pid = start(procs, tmp_path)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    status, _, body = get(conn, "GET", "/late?s=1")
    assert status == 504 and b"0.2 s" in body, body
    conn.close()
    workers = descendants(pid)
    procs.watch(workers)
    proc = procs.started[-1]
    proc.send_signal(signal.SIGTERM)  # (the call runs on for ~0.8 s)
    assert proc.wait(timeout=20) == 143
    assert not wait_gone(workers)
    assert proc.stderr is not None
    said = rest_of(proc.stderr)
    assert "never looked at" not in said and "CallTimeoutError" not in said, said


def test_serve_with_the_hosts_engine_and_no_registry_blames_the_override(
        tmp_path: Path) -> None:
    """As `run` does: the key an override wrote is the mistake, said before anything
    starts (serve blamed the file's cluster.registry, from inside the cluster's start)."""
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB))
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(overflow="block", tracebacks="false", queue=10))
    p = cli("serve", app, "--set", "cluster.engine=hosts")
    assert p.returncode == 2
    assert "--set: cluster.engine: the hosts engine uses workers already running" in p.stderr


def test_a_second_sigterm_while_serve_stops_still_cleans_up(procs: Procs, tmp_path: Path) -> None:
    """The first SIGTERM stops the front door, and a second one ends the grace of the
    request in flight (answered 503); a third, while the engine waits for a replica
    inside a long call, used to end serve outright (asyncio had put SIGTERM's default
    action back) and leave the replica's log in $TMPDIR. Serve exits 143 (it exited 0,
    and this test took that too)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mark = tmp_path / "slow-began"
    host, port, pid = start(procs, tmp_path / "app", env={"TMPDIR": str(tmp),
                                                           "MARK": str(mark)})
    workers = descendants(pid)
    procs.watch(workers)
    with socket.create_connection((host, port), timeout=10) as pending:
        pending.sendall(b"GET /slow?s=60 HTTP/1.1\r\nHost: h\r\n\r\n")
        deadline = time.monotonic() + 30
        while not mark.exists():  # the replica is inside the call
            assert time.monotonic() < deadline, "the request never reached its replica"
            time.sleep(0.02)
        proc = procs.started[-1]
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        read_line(proc.stderr, r"1 in flight get 5 s to finish")
        proc.send_signal(signal.SIGTERM)
        assert pending.recv(65536).startswith(b"HTTP/1.1 503 ")  # (the engine stops now)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 143
    assert not wait_gone(workers)
    assert list(tmp.iterdir()) == []


def _concurrent(host: str, port: int, n: int, s: float = 0.4
                ) -> list[tuple[int, dict[str, str]]]:
    out: list[tuple[int, dict[str, str]]] = []
    lock = threading.Lock()

    def one() -> None:
        c = http.client.HTTPConnection(host, port, timeout=60)
        status, headers, _ = get(c, "GET", f"/slow?s={s}")
        c.close()
        with lock:
            out.append((status, headers))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return out


def test_a_full_queue_rejects_with_503_under_reject(procs: Procs, tmp_path: Path) -> None:
    host, port, _ = start(procs, tmp_path, overflow="reject", tracebacks=True, queue=1)
    got = _concurrent(host, port, 6)
    statuses = sorted(s for s, _ in got)
    assert len(got) == 6 and 201 in statuses and 503 in statuses
    assert set(statuses) <= {201, 503}
    assert all(h.get("Retry-After") == "1" for s, h in got if s == 503)
    # said on stderr as a 500 or a 504 is (once a minute a route: the rest counted)
    serve = procs.started[-1]
    assert serve.stderr is not None
    read_line(serve.stderr, r"^polybus serve: GET /slow\?s=0\.4 -> web\.slow: 503 ", timeout=30)
    c = http.client.HTTPConnection(host, port, timeout=30)
    status, _, body = get(c, "GET", "/boom")
    assert status == 500 and b"remote traceback" in body and b"in boom" in body
    assert get(c, "GET", "/slow?s=0")[0] == 201  # and it serves on
    c.close()


def test_serve_warns_of_a_queue_that_bounds_nothing(procs: Procs, tmp_path: Path) -> None:
    # slow's queue = 1 beside hello's default 1000: the replica's queue is 1000 and
    # nothing is rejected; check warned, and serve said nothing.
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB))
    app = tmp_path / "app.toml"
    app.write_text('[modules.web]\nsource = "web.py"\ndefine.hello = {}\n'
                   'define.slow = { queue = 1, overflow = "reject" }\n'
                   '[serve]\nlisten = "127.0.0.1:0"\n[serve.routes]\n"GET /" = "web.hello"\n')
    p = procs.start("serve", app)
    assert p.stderr is not None
    read_line(p.stderr, r"^warning: .*modules\.web\.define\.slow\.queue: queue = 1 has no "
                        r"effect", timeout=60)
    read_line(p.stderr, r"listening on http://", timeout=60)


def test_a_full_queue_holds_the_requests_back_under_block(procs: Procs, tmp_path: Path) -> None:
    host, port, _ = start(procs, tmp_path, overflow="block", queue=1)
    got = _concurrent(host, port, 6, s=0.2)  # (one at a time: 1.2 s in all)
    assert sorted(s for s, _ in got) == [201] * 6


def test_the_rudy_example_serves_its_page_and_its_work(procs: Procs) -> None:
    p = procs.start("serve", EXAMPLES / "rudy" / "app.toml", "--listen", "127.0.0.1:0")
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    c = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=30)
    status, headers, body = get(c, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html") and b"rudy" in body
    assert get(c, "GET", "/work?ms=1")[::2] == (200, b'{"slept_ms":1.0}')
    assert get(c, "POST", "/echo/x")[0] == 400  # the example's own (status, headers, body)
    c.close()


def test_serve_with_parts_started_by_hand(procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "serve-token-" + "y" * 20}
    app = EXAMPLES / "rudy" / "app.toml"
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "web",
                    "--name", "web-by-hand", env=env)
    assert w.stderr is not None
    read_line(w.stderr, r"serving .*work@http")  # the routed forms come from [serve]
    # A setting the replicas apply themselves is the worker's own, not serve's --set:
    # said, as `run --registry` says it (serve dropped it without a word).
    p = procs.start("serve", app, "--registry", addr, "--listen", "127.0.0.1:0",
                    "--set", "modules.web.define.work.pool=1", env=env)
    assert p.stderr is not None
    warned = read_line(p.stderr, r"warning: .*", timeout=60).group(0)
    assert ("warning: --set: modules.web.define.work.pool: the replicas started by hand "
            "apply their own define.work.pool: web-by-hand has 100 where this run's "
            "configuration gives 1") in warned, warned
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    c = http.client.HTTPConnection(m.group(1), int(m.group(2)), timeout=30)
    assert get(c, "GET", "/work?ms=0")[::2] == (200, b'{"slept_ms":0.0}')
    c.close()
    p.send_signal(signal.SIGINT)  # Ctrl-C
    assert p.wait(timeout=20) == 130
    assert w.poll() is None  # a worker started by hand is not serve's to stop


def test_a_worker_started_with_module_for_a_served_program_is_named(procs: Procs) -> None:
    # --module serves no HTTP forms ([serve] makes them): every request was a 5xx.
    env = {"POLYBUS_TOKEN": "serve-token-" + "x" * 20}
    app = EXAMPLES / "rudy" / "app.toml"
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", EXAMPLES / "rudy" / "web.py",
                    "--name", "web-plain", env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    p = cli("serve", app, "--registry", addr, "--listen", "127.0.0.1:0", env=env, timeout=60)
    assert p.returncode == 2, p.stderr
    assert ("replica web-plain serves 'page' but not its HTTP form: start the workers of a "
            f"served program with `polybus worker --config {app} --as web`, not --module"
            in p.stderr), p.stderr


def test_a_port_in_use_is_one_clear_error_before_anything_starts() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        p = cli("serve", EXAMPLES / "rudy" / "app.toml", "--listen", f"127.0.0.1:{port}",
                timeout=30)
    assert p.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in p.stderr
    assert "--listen 127.0.0.1:0 takes a free one" in p.stderr  # (and how to go on)
    assert "Traceback" not in p.stderr


PARENT = """
import subprocess, sys, time
err = open(sys.argv[2], "wb")
child = subprocess.Popen([sys.executable, "-m", "polybus", "serve", sys.argv[1], "--listen",
                          "127.0.0.1:0", "--exit-with-parent"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err)
print(child.pid, flush=True)
time.sleep(120)
"""


def test_a_front_door_started_with_exit_with_parent_ends_with_its_parent(tmp_path: Path) -> None:
    """The rudy benchmark starts `polybus serve` itself; killed outright (no cleanup
    runs), it must not leave the front door and its replicas behind."""
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB))
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(overflow="block", tracebacks="false", queue=1000))
    log = tmp_path / "serve.log"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(app), str(log)],
                              stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=env_with())
    tree: set[int] = set()
    try:
        assert parent.stdout is not None
        serve_pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while "listening on http://" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        tree = {serve_pid} | descendants(serve_pid)
        assert len(tree) > 1  # the front door and its replica(s)
        parent.kill()  # no finally, no atexit: only the kernel's death signal is left
        parent.communicate()
        assert wait_gone(tree, timeout=20) == set()
    finally:
        kill_all(tree)
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
