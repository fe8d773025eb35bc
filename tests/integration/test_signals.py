"""Signals end what polybus started, promptly, and leave nothing behind.

A worker started by hand gets SIGTERM while its replica runs calls that do not end soon
(a sleep, a pure-Python loop, a call that ignores SIGTERM itself); `polybus run` gets
SIGTERM or Ctrl-C twice while its client waits on such a call. Every process ends
within a generous bound, and the files the engine made in $TMPDIR go with them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from integration.conftest import (
    POLYBUS,
    Procs,
    alive,
    descendants,
    env_with,
    finish,
    kill_all,
    read_line,
    rest_of,
    wait_gone,
)
from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.config import load
from polybus.errors import RemoteError
from polybus.registry.service import RegistryService
from polybus.testing.apps import write_app
from polybus.token import ENV, make_token

SERVER = """
    import os, signal, time

    def _started():
        with open(os.path.join(os.environ["MARKS"], "started"), "a") as f:
            f.write(f"{os.getpid()}\\n")

    def pid():
        return os.getpid()

    def nap(s):
        _started()
        time.sleep(s)
        return s

    def spin(s):
        _started()
        end = time.monotonic() + s
        while time.monotonic() < end:  # pure Python: no system call to interrupt
            pass
        return s

    def deaf(s):
        # Only a main thread may set a handler: a pool's child process can ignore SIGTERM.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return spin(s)
"""

CLIENT = """
    from polybus import use

    pid = use("pid")
    nap = use("nap")

    def main(path):
        pids = {pid() for _ in range(8)}
        with open(path, "w") as f:
            f.write(" ".join(map(str, sorted(pids))))
        return nap(60)
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = "tcp"
    define.pid = {}
    define.nap = {}
    define.spin = {}
    define.deaf = {}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["PIDS"]
    use.pid = { callstyle = "sync" }
    use.nap = { callstyle = "async" }
    use.spin = { callstyle = "async" }
    use.deaf = { callstyle = "async" }

    [bind]
    "client.pid" = "server.pid"
    "client.nap" = "server.nap"
    "client.spin" = "server.spin"
    "client.deaf" = "server.deaf"
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "marks").mkdir()
    return write_app(tmp_path, server=SERVER, client=CLIENT,
                     toml=TOML.replace("PIDS", str(tmp_path / "pids")))


def _until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _started(app: Path) -> int:
    f = app.parent / "marks" / "started"
    return len(f.read_text().split()) if f.exists() else 0


class ByHand:
    """An embedded registry, one `polybus worker` started by hand, a client session."""

    def __init__(self, app: Path, procs: Procs) -> None:
        self.app, self.procs = app, procs
        self.token = make_token()
        self.registry = RegistryService(self.token, "tcp://127.0.0.1:0")
        self.address = f"{self.registry.address.host}:{self.registry.address.port}"
        self.sessions: list[Session] = []

    def worker(self, *sets: str) -> subprocess.Popen[str]:
        args = [a for s in sets for a in ("--set", s)]
        w = self.procs.start("worker", "--registry", self.address, "--config", self.app,
                             "--as", "server", "--name", "server-0", *args,
                             env={ENV: self.token.decode(), "MARKS": str(self.app.parent / "marks")})
        assert w.stderr is not None
        read_line(w.stderr, "serving")
        self.sets = sets
        return w

    def session(self) -> Session:
        s = Session(load(self.app, ("modules.server.replication=1", *self.sets)),
                    self.address, self.token)
        self.sessions.append(s)
        return s

    def close(self) -> None:
        for s in self.sessions:
            s.close()
        self.registry.close()


@pytest.fixture
def by_hand(app: Path, procs: Procs) -> Iterator[ByHand]:
    h = ByHand(app, procs)
    try:
        yield h
    finally:
        h.close()


def _semaphores(pid: int) -> set[str]:
    """The named semaphores (multiprocessing's queues) ``pid`` has mapped."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return set()
    return set(re.findall(r"/dev/shm/sem\.\S+", maps))


@pytest.mark.parametrize("fn", ["nap", "spin"])
def test_sigterm_ends_a_worker_whose_whole_pool_runs_long_calls(by_hand: ByHand, fn: str) -> None:
    """Every thread of a pool of 8 inside a 60 s call. The worker used to wait up to 2 s
    for each thread in turn (16 s and more); now the grace is 2 s for all of them. It
    says so as `run` would, with the calls it leaves unanswered (it exited 0, silent)."""
    w = by_hand.worker(f"modules.server.define.{fn}.pool=8")
    session = by_hand.session()
    for _ in range(8):
        session.call(fn, (60,), {})
    _until(lambda: _started(by_hand.app) == 8)
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=10) == 143
    assert w.stderr is not None
    said = rest_of(w.stderr)
    assert said.endswith("polybus worker: terminated; 8 calls it held were left unanswered "
                         "(still running, or queued)\n"), said


def test_a_call_in_a_pool_thread_cannot_make_its_worker_ignore_sigterm(by_hand: ByHand) -> None:
    """Only a main thread may set a signal handler: the call fails, the worker stops."""
    w = by_hand.worker()
    with pytest.raises(RemoteError, match="ValueError: signal only works in main thread"):
        wait(by_hand.session().call("deaf", (60,), {}))
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=10) == 143


@pytest.mark.parametrize("fn", ["spin", "deaf"])
def test_sigterm_ends_a_worker_and_its_process_pool_inside_a_long_call(
        by_hand: ByHand, fn: str) -> None:
    """pool = "processes:2" with a child inside a 60 s pure-Python call (that ignores
    SIGTERM itself, for `deaf`). The worker used to wait for the call to end."""
    w = by_hand.worker(f'modules.server.define.{fn}.pool="processes:2"')
    session = by_hand.session()
    session.call(fn, (60,), {})
    _until(lambda: _started(by_hand.app) == 1)
    tree = descendants(w.pid)
    by_hand.procs.watch(tree)
    sems = _semaphores(w.pid)  # (none: the pool's locks are pipes, worker/pipelocks.py)
    assert len(tree) >= 2  # two children (and multiprocessing's tracker)
    w.send_signal(signal.SIGTERM)
    assert w.wait(timeout=10) == 143
    assert wait_gone(tree, timeout=10) == set()
    assert not [s for s in sems if os.path.exists(s)]


def test_a_killed_worker_takes_its_process_pool_with_it(by_hand: ByHand) -> None:
    """SIGKILL (the engine's last resort) leaves no child of a process pool behind; an
    idle child used to wait forever on a queue whose writing end it held itself."""
    w = by_hand.worker('modules.server.define.spin.pool="processes:2"')
    session = by_hand.session()
    session.call("spin", (60,), {})
    _until(lambda: _started(by_hand.app) == 1)
    tree = descendants(w.pid)
    by_hand.procs.watch(tree)
    assert len(tree) >= 2
    w.kill()
    w.wait(timeout=10)
    assert wait_gone(tree, timeout=10) == set()
    assert not any(alive(p) for p in tree)


@pytest.mark.parametrize(("signals", "transport", "status"), [
    (["SIGTERM"], "tcp", 143),
    (["SIGINT", "SIGINT"], "shm", 130),  # the second one while the engine stops its workers
])
def test_a_signalled_run_stops_its_workers_and_leaves_no_files(
        app: Path, procs: Procs, tmp_path: Path, signals: list[str], transport: str,
        status: int) -> None:
    """SIGTERM used to end `polybus run` at once: its workers went only by their death
    signal, and their logs (and the shm socket directory) stayed in $TMPDIR; so did
    they when a second Ctrl-C cut the engine's stop short."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = procs.start("run", app, "--quiet", "--set", f'modules.server.transport="{transport}"',
                      env={"TMPDIR": str(tmp), "MARKS": str(tmp_path / "marks")})
    _until(lambda: _started(app) == 1)  # the client waits on nap(60)
    workers = {int(p) for p in (tmp_path / "pids").read_text().split()}
    procs.watch(workers)
    assert len(workers) == 2 and workers <= descendants(run.pid)
    for name in signals:
        run.send_signal(getattr(signal, name))
        time.sleep(0.3)
    _, err = finish(run, timeout=20)
    assert run.returncode == status, err
    assert ("terminated" if status == 143 else "interrupted") in err
    assert wait_gone(workers, timeout=10) == set()
    assert list(tmp.iterdir()) == []


def test_a_run_killed_outright_leaves_one_directory_that_the_next_run_removes(
        app: Path, procs: Procs, tmp_path: Path, short_tmp: Path) -> None:
    """Nothing runs in a SIGKILLed run, so its files stay: they were a log per worker
    and the shm socket directory, loose in $TMPDIR for good. Now they are in one
    directory named with the run's pid, which the next run removes."""
    tmp = short_tmp
    env = {"TMPDIR": str(tmp), "MARKS": str(tmp_path / "marks")}
    run = procs.start("run", app, "--quiet", "--set", 'modules.server.transport="shm"', env=env)
    _until(lambda: _started(app) == 1)  # the client waits on nap(60)
    workers = {int(p) for p in (tmp_path / "pids").read_text().split()}
    procs.watch(workers)
    run.kill()
    run.wait(timeout=10)
    assert wait_gone(workers, timeout=30) == set()
    left = list(tmp.iterdir())
    assert len(left) == 1 and left[0].name.startswith(f"polybus-{run.pid}-"), left
    assert left[0].is_dir() and len(list(left[0].glob("*.log"))) == 2
    quick = write_app(tmp_path / "quick", server="def one():\n    return 1\n",
                      client="from polybus import use\n\ndef main():\n    return use('one')()\n",
                      toml=TOML_QUICK)
    again = procs.start("run", quick, "--quiet", env=env)
    _, err = finish(again, timeout=60)
    assert again.returncode == 0, err
    assert list(tmp.iterdir()) == []


TOML_QUICK = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.one" = "server.one"
"""


def test_an_engine_worker_whose_run_died_before_it_started_ends(
        by_hand: ByHand, tmp_path: Path) -> None:
    """The death signal is asked for once the worker runs Python: a run that died
    sooner (SIGKILL during start-up) sends none. Here its parent, a shell, is gone at
    once; the worker used to serve on, registered, an orphan."""
    marks = tmp_path / "marks"
    (tmp_path / "server.py").write_text(f"open({str(marks / 'imported')!r}, 'w').close()\n"
                                        "def pid():\n    return 0\n")
    cmd = " ".join([*POLYBUS, "worker", "--registry", by_hand.address, "--module",
                    str(tmp_path / "server.py"), "--exit-with-parent", "--parent", "$$"])
    err = tmp_path / "worker.err"
    sh = subprocess.run(["sh", "-c", f"{cmd} >/dev/null 2>{err} </dev/null & echo $!"],
                        env=env_with({ENV: by_hand.token.decode()}), capture_output=True,
                        text=True, timeout=10, check=True)
    worker = int(sh.stdout)
    try:
        assert wait_gone({worker}, timeout=10) == set()
        assert not (marks / "imported").exists()  # it ended before the user's module ran
        assert "polybus worker: terminated" in err.read_text(), err.read_text()
    finally:
        kill_all({worker})
