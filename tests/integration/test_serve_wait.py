"""`polybus serve` holds a call lost with every replica, and a request that finds none
live, for the workers it starts again, as a run at a shared registry does
(http/revival.py, client/rejoin.py): they are answered by the new processes, not
502ed at once. The call that ended every replica it ran on fails as the client's rule
says (client/backlog.py), and is not run on every new worker for ever.

Behaviour only: the requests are waited for (bounded), never timed."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

from integration.conftest import Procs, descendants, read_line
from integration.test_serve_revival import _get, _get_with_headers, _listening, _pids_until

WEB = '''\
import os
import time


def pid():
    return {"pid": os.getpid()}


def slow():
    time.sleep(0.5)
    return {"pid": os.getpid()}


def boom():
    os._exit(7)
'''

TOML = '''\
[modules.web]
source = "web.py"
replication = {replication}

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /pid" = "web.pid"
"GET /slow" = "web.slow"
"GET /boom" = "web.boom"
'''


def _app(where: Path, replication: int) -> Path:
    (where / "web.py").write_text(WEB)
    app = where / "app.toml"
    app.write_text(TOML.format(replication=replication))
    return app


def _in_thread(host: str, port: int, url: str, got: list[tuple[str, int, bytes]]
               ) -> threading.Thread:
    def ask() -> None:
        try:
            status, body = _get(host, port, url)
        except OSError as e:  # (said in the assertion, not lost in a thread)
            status, body = -1, repr(e).encode()
        got.append((url, status, body))
    t = threading.Thread(target=ask, daemon=True)
    t.start()
    return t


def test_requests_lost_with_both_replicas_wait_for_the_workers_started_again(
        procs: Procs, tmp_path: Path) -> None:
    """A request that ends its worker (os._exit(7)) ended web-1, ran again on web-0 and
    ended it too: every request in flight there got `502 ... was lost: every replica of
    slow@http is gone`, and those that came then `502 ... retry later`, until the
    workers serve started again registered. Now they wait and are answered by the new
    workers; the poison request fails once it has ended 3 replicas."""
    host, port, pid = _listening(procs, _app(tmp_path, 2))
    procs.watch(descendants(pid))
    before = _pids_until(host, port, 2)
    got: list[tuple[str, int, bytes]] = []
    threads = [_in_thread(host, port, "/boom", got)]
    time.sleep(0.05)
    threads += [_in_thread(host, port, "/slow", got) for _ in range(4)]  # in flight
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"polybus serve: worker web-\d exited with status 7", timeout=30)
    read_line(err, r"polybus serve: worker web-\d exited with status 7", timeout=30)
    for _ in range(6):  # arriving while the workers are started again
        threads.append(_in_thread(host, port, "/pid", got))
        time.sleep(0.1)
    for t in threads:
        t.join(timeout=90)
    assert len(got) == 11, got
    poison = [(s, b) for url, s, b in got if url == "/boom"]
    others = [(url, s, b) for url, s, b in got if url != "/boom"]
    assert [s for url, s, b in others] == [200] * 10, got
    came = {json.loads(b)["pid"] for url, s, b in others if url == "/pid"}
    assert not came & before, (came, before)  # (answered by the workers started again)
    procs.watch(descendants(pid))
    ((status, body),) = poison
    assert status == 502, body
    assert b"was lost with 3 replicas of boom@http in a row" in body, body
    assert b"it is not tried again" in body, body
    assert re.search(rb"; worker web-\d exited with status 7\n$", body), body
    assert len(_pids_until(host, port, 2, timeout=60)) == 2  # the route serves on


HANG = '''\
import os
import time

if os.path.exists(os.environ["AGAIN"]):  # (a worker started again: not back soon)
    time.sleep(60)


def pid():
    return {"pid": os.getpid()}


def hang():
    open(os.environ["MARK"], "w").close()
    time.sleep(60)
'''


def _slow_back(procs: Procs, tmp_path: Path) -> tuple[str, int, int, int, Path, Path]:
    """Serve with one worker of HANG, whose worker started again takes 60 s to register
    once ``again`` exists: (host, port, serve's pid, the worker's pid, mark, again)."""
    (tmp_path / "web.py").write_text(HANG)
    app = tmp_path / "app.toml"
    app.write_text('[modules.web]\nsource = "web.py"\nreplication = 1\n\n[serve]\n'
                   'listen = "127.0.0.1:0"\ngrace = "60s"\n\n[serve.routes]\n'
                   '"GET /pid" = "web.pid"\n"GET /hang" = "web.hang"\n'
                   '"GET /quick" = { to = "web.pid", timeout = "0.3s" }\n')
    mark, again = tmp_path / "hang-started", tmp_path / "again"
    host, port, pid = _listening(procs, app, env={"MARK": str(mark), "AGAIN": str(again)})
    (worker,) = _pids_until(host, port, 1)
    procs.watch({worker})
    again.touch()
    return host, port, pid, worker, mark, again


def test_a_request_waiting_for_a_worker_started_again_gets_its_timeout(
        procs: Procs, tmp_path: Path) -> None:
    """The route's own timeout runs over the wait: its 504, not a 502. (The worker
    started again registers only 60 s later: a wait the timeout did not bound would
    end in a 502 after 5 s.)"""
    host, port, pid, worker, _, _ = _slow_back(procs, tmp_path)
    os.kill(worker, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"replica web-0 of module 'web' was lost", timeout=30)
    procs.watch(descendants(pid))
    status, body = _get(host, port, "/quick")
    assert status == 504, body
    assert b"no answer from GET /quick within 0.3 s: none of its lost replicas came back " \
        b"in that time" in body, body


def test_a_call_waiting_for_a_worker_fails_at_once_when_serve_stops(
        procs: Procs, tmp_path: Path) -> None:
    """Serve's first signal stops its workers being started again: a call lost with its
    worker, waiting for the one started again, got its 502 only 5 s later (serve's stop
    held as long), saying "retry later" (and Retry-After) of a worker nothing would
    start again. Now it fails at once, saying it is not started again."""
    host, port, pid, worker, mark, _ = _slow_back(procs, tmp_path)
    got: list[tuple[int, bytes, dict[str, str]]] = []
    hang = threading.Thread(target=lambda: got.append(_get_with_headers(host, port, "/hang")),
                            daemon=True)
    hang.start()
    deadline = time.monotonic() + 30
    while not mark.exists():  # (the request is in its worker's call)
        assert time.monotonic() < deadline, "the request never reached its worker"
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)  # (a worker this test's serve started)
    serve = procs.started[-1]
    assert serve.stderr is not None
    read_line(serve.stderr, r"replica web-0 of module 'web' was lost", timeout=30)
    procs.watch(descendants(pid))
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=60) == 143
    hang.join(timeout=30)
    ((status, body, headers),) = got
    assert status == 502, body
    assert re.match(rb"502 Bad Gateway: web\.hang: the call hang@http\(\) was lost: every "
                    rb"replica of hang@http is gone", body), body
    assert body.endswith(b"; worker web-0 was killed by signal 9 (SIGKILL); not started "
                         b"again (serve is stopping): this route answers 502 until serve "
                         b"is restarted\n"), body
    assert "Retry-After" not in headers, headers
