"""`polybus serve` starts again a local worker that ended on its own, and the front
door serves through the new process (engines/supervise.py, http/revival.py).

Behaviour only: each test asks until the front door answers again, within a bound."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from integration.conftest import Procs, descendants, read_line, rest_of
from integration.test_serve_revival import _app as _app_of
from integration.test_serve_revival import _get, _get_with_headers, _listening, _pids_until


def _app(where: Path, replication: int) -> Path:
    """The web app, its workers started again after 0.1 s (doubled while they keep
    ending), not 0.5 s: what is tested is that they are, and what is said."""
    app = _app_of(where, replication)
    app.write_text(app.read_text().replace('listen = "127.0.0.1:0"\n',
                                           'listen = "127.0.0.1:0"\nrestart_pause = "0.1s"\n'))
    return app


def test_a_worker_that_exits_is_started_again_and_serves(procs: Procs, tmp_path: Path) -> None:
    host, port, pid = _listening(procs, _app(tmp_path, 1))
    (first,) = _pids_until(host, port, 1)
    procs.watch({first})
    status, body, headers = _get_with_headers(host, port, "/bye")  # (its process ends)
    assert status == 502, body  # (run again on each worker started again, 3 in all)
    assert b"bye@http() was lost with 3 replicas of bye@http in a row" in body, body
    assert body.endswith(b"; worker web-0 exited with status 3\n"), body
    assert "Retry-After" not in headers, headers  # (the call is not tried again)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"polybus serve: worker web-0 exited with status 3; "
                   r"starting it again in 0\.1 s", timeout=30)
    read_line(err, r"polybus serve: worker web-0 started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    (second,) = _pids_until(host, port, 1)  # asked until it answers
    assert second != first and second in descendants(pid)


def test_a_worker_lost_again_after_its_restart_is_said_as_it_ended_the_second_time(
        procs: Procs, tmp_path: Path) -> None:
    """A replica name lost twice in one serve: its first worker killed, started again,
    then its second exits with status 3. The second loss went unsaid (a name's loss
    was said once a session), and its 502 named how the first worker ended."""
    host, port, pid = _listening(procs, _app(tmp_path, 1))
    (first,) = _pids_until(host, port, 1)
    procs.watch({first})
    os.kill(first, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker was killed by signal 9 (SIGKILL)"), m.group(0)
    read_line(err, r"polybus serve: worker web-0 started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    (second,) = _pids_until(host, port, 1)  # asked until it answers (dialled again)
    assert second != first
    status, body = _get(host, port, "/bye")  # the handler ends its process (status 3)
    assert status == 502, body  # (and the workers started again after it: 3 in all)
    assert b"bye@http() was lost with 3 replicas of bye@http in a row" in body, body
    assert body.endswith(b"; worker web-0 exited with status 3\n"), body
    assert b"SIGKILL" not in body, body
    m = read_line(err, r"polybus: warning: replica web-0 of module 'web' was lost: (.*)",
                  timeout=30)
    assert m.group(1).endswith("; its worker exited with status 3"), m.group(0)


# Appended to the workers' module: a fault in polybus made to order. Once /die has run,
# the next time a pool thread (or the poller) of its worker looks for held answers, it
# raises SystemExit outside any call's steps, and the thread ends (worker/runtime.py,
# `_guarded`). Patched in the module, so in each worker process that imports it.
DIES = """

import threading as _threading

from polybus.worker.runtime import WorkerRuntime as _Runtime

_doomed = _threading.Event()
_release_held = _Runtime._release_held


def _broken(self, *, every):
    if _doomed.is_set() and not _threading.current_thread().name.endswith("standby"):
        raise SystemExit("injected")
    return _release_held(self, every=every)


_Runtime._release_held = _broken


def die():
    _doomed.set()
    return {}
"""


def test_a_worker_whose_thread_dies_stops_loudly_and_is_started_again(
        procs: Procs, tmp_path: Path) -> None:
    """A thread of a worker serve started ends by an exception (a fault in polybus):
    that worker stops with status 2 and says why, as `polybus worker` does, rather than
    serve on registered and deaf; serve says how it ended, with its log's last line, and
    starts it again (a worker that failed on its own), and the route is answered by the
    new process. serve itself serves on: it outlives any one worker."""
    app = _app(tmp_path, 1)
    with open(tmp_path / "web.py", "a") as f:
        f.write(DIES)
    app.write_text(app.read_text() + '"GET /die" = "web.die"\n')
    host, port, pid = _listening(procs, app)
    (first,) = _pids_until(host, port, 1)
    procs.watch({first})
    _get(host, port, "/die")  # (answered, or 502 if its thread ended first)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"\(web-0\) polybus worker: error: worker web-0 stopped: its thread "
                   r"polybus-web-0-\S+ ended by SystemExit: injected", timeout=30)
    read_line(err, r"polybus serve: worker web-0 exited with status 2; its log ends: "
                   r"polybus worker: error: worker web-0 stopped: its thread "
                   r"polybus-web-0-\S+ ended by SystemExit: injected \(a fault in polybus; "
                   r"its log above says where\); starting it again in 0\.1 s", timeout=30)
    read_line(err, r"polybus serve: worker web-0 started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    (second,) = _pids_until(host, port, 1)  # asked until it answers
    assert second != first and second in descendants(pid)
    assert procs.started[-1].poll() is None  # serve serves on


def test_a_killed_worker_of_two_is_started_again(procs: Procs, tmp_path: Path) -> None:
    host, port, pid = _listening(procs, _app(tmp_path, 2))
    workers = descendants(pid)
    procs.watch(workers)
    before = _pids_until(host, port, 2)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"polybus serve: worker web-\d was killed by signal 9 \(SIGKILL\)",
              timeout=30)
    read_line(err, r"started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    after = _pids_until(host, port, 2, timeout=60)
    assert victim not in after and len(after & before) == 1


def test_a_route_with_work_stealing_gets_its_restarted_replica_back(
        procs: Procs, tmp_path: Path) -> None:
    """Its links were never refilled: a migrator's replicas stayed lost for good."""
    app = _app(tmp_path, 2)
    app.write_text(app.read_text().replace('"GET /pid" = "web.pid"',
                                           '"GET /pid" = { to = "web.pid", balance = "steal" }'))
    host, port, pid = _listening(procs, app)
    procs.watch(descendants(pid))
    before = _pids_until(host, port, 2)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)  # (a worker this test's serve started)
    err = procs.started[-1].stderr
    assert err is not None
    read_line(err, r"started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    after = _pids_until(host, port, 2, timeout=60)
    assert victim not in after and len(after & before) == 1


def test_no_worker_is_started_again_when_the_whole_group_is_stopped(
        procs: Procs, tmp_path: Path) -> None:
    """SIGTERM to serve's process group (systemd's default KillMode, `kill -- -PGID`):
    the workers exited 0 during serve's grace, and one was started again only to be
    stopped."""
    import subprocess

    from integration.conftest import POLYBUS, env_with

    app = _app(tmp_path, 2)
    with open(tmp_path / "web.py", "a") as f:  # (2 s: past a restart's pause)
        f.write("\n\ndef slow():\n    open(os.environ['MARK'], 'w').close()\n"
                "    time.sleep(2)\n    return {}\n")
    app.write_text(app.read_text() + '"GET /slow" = "web.slow"\n')
    mark = tmp_path / "slow-started"
    p = subprocess.Popen([*POLYBUS, "serve", str(app)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         env=env_with({"MARK": str(mark)}), start_new_session=True)
    procs.started.append(p)  # (ended with the test whatever happens)
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    host, port = m.group(1), int(m.group(2))
    procs.watch(descendants(p.pid))
    assert len(_pids_until(host, port, 2)) == 2
    slow = threading.Thread(target=lambda: _get_quietly(host, port, "/slow"), daemon=True)
    slow.start()  # in flight as serve stops: its grace is when a restart came
    deadline = time.monotonic() + 30
    while not mark.exists():  # (the request is in its replica's call)
        assert time.monotonic() < deadline, "the request never reached its worker"
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGTERM)  # (the group this test made: serve and its workers)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    # (a lost replica's look may say its worker is "not started again: serve is
    # stopping", which is what this checks)
    said = err.replace("not started again", "")
    assert "started again" not in said and "starting it again" not in said, err


def _get_quietly(host: str, port: int, url: str) -> None:
    try:
        _get(host, port, url)
    except OSError:  # (answered 503, or the connection closed as serve stopped)
        pass


def test_a_restarted_worker_serves_its_requests_in_flight_as_serve_stops(
        procs: Procs, tmp_path: Path) -> None:
    """Serve stopped by SIGINT with a request in flight on a worker it had started again:
    the worker was stopped at once (its starting thread, the supervisor's, ended at
    serve's first signal, and PR_SET_PDEATHSIG sent it SIGTERM), before the request's
    grace was over and before the session closed its links: the request failed and
    serve warned "replica web-0 of module 'web' was lost: connection ... broke"."""
    app = _app(tmp_path, 1)
    with open(tmp_path / "web.py", "a") as f:  # (longer than a worker's 2 s to stop)
        f.write("\n\ndef slow():\n    open(os.environ['MARK'], 'w').close()\n"
                "    time.sleep(2.5)\n    return {'slow': os.getpid()}\n")
    app.write_text(app.read_text().replace('listen = "127.0.0.1:0"',
                                           'listen = "127.0.0.1:0"\ngrace = "60s"')
                   + '"GET /slow" = "web.slow"\n')
    mark = tmp_path / "slow-started"
    host, port, pid = _listening(procs, app, env={"MARK": str(mark)})
    (first,) = _pids_until(host, port, 1)
    procs.watch({first})
    os.kill(first, signal.SIGKILL)  # (a worker this test's serve started)
    serve = procs.started[-1]
    assert serve.stderr is not None
    read_line(serve.stderr, r"worker web-0 started again \(restart 1\)", timeout=30)
    procs.watch(descendants(pid))
    (second,) = _pids_until(host, port, 1)
    got: list[tuple[int, bytes]] = []
    slow = threading.Thread(target=lambda: got.append(_get(host, port, "/slow")), daemon=True)
    slow.start()
    deadline = time.monotonic() + 30
    while not mark.exists():  # (the request is in the restarted worker's call)
        assert time.monotonic() < deadline, "the request never reached its worker"
        time.sleep(0.05)
    serve.send_signal(signal.SIGINT)
    assert serve.wait(timeout=60) == 130
    slow.join(timeout=30)
    err = rest_of(serve.stderr)
    assert "was lost" not in err, err
    assert got and got[0][0] == 200 and json.loads(got[0][1]) == {"slow": second}, (got, err)
