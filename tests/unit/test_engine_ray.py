"""The ray engine's parts that need no Ray: a cluster too small for the replicas is said
at once, and `polybus check` says what each engine will start, or what it lacks."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import main
from polybus.config import load
from polybus.engines.ray import RayEngine
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app


class _FakeRay:
    def __init__(self, cpus: float) -> None:
        self.cpus = cpus

    def cluster_resources(self) -> dict[str, Any]:
        return {"CPU": self.cpus}


def _engine(tmp_path: Path, cpus: float) -> RayEngine:
    engine = RayEngine.__new__(RayEngine)  # (no Ray imported: only its resources asked)
    engine.app = load(write_one_call_app(tmp_path, server_keys="replication = 3"))
    engine.ray = _FakeRay(cpus)
    return engine


def test_a_cluster_with_fewer_cpus_than_replicas_is_said_at_once(tmp_path: Path) -> None:
    _engine(tmp_path, 3)._enough_cpus(3)  # enough: nothing said
    with pytest.raises(ConfigError) as info:
        _engine(tmp_path, 2)._enough_cpus(3)
    assert info.value.key == "cluster.engine"
    assert "each of the 3 replicas as an actor of one CPU; this Ray cluster has 2" in str(
        info.value)


@pytest.mark.parametrize(("engine", "says"), [("mpi", "mpi: mpiexec -n 3"),
                                              ("ray", "ray: 2 actor(s) of 1 CPU")])
def test_check_says_what_the_engine_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           engine: str, says: str) -> None:
    app = write_one_call_app(tmp_path, server_keys="replication = 2",
                             tail=f'[cluster]\nengine = "{engine}"\n')
    status = main(["check", str(app)])
    out = capsys.readouterr()
    if importlib.util.find_spec({"mpi": "mpi4py", "ray": "ray"}[engine]) is None:
        assert status == 2 and "is not installed" in out.err
    else:
        assert status == 0 and says in out.out, out


@pytest.mark.parametrize(("engine", "package"), [("ray", "ray"), ("mpi", "mpi4py")])
@pytest.mark.parametrize("by_set", [False, True])
def test_check_says_an_engine_whose_package_is_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, engine: str, package: str, by_set: bool) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == package else real(name, *a))
    if by_set:
        app = write_one_call_app(tmp_path)
        argv = ["check", str(app), "--no-import", "--set", f"cluster.engine={engine}"]
    else:
        app = write_one_call_app(tmp_path, tail=f'[cluster]\nengine = "{engine}"\n')
        argv = ["check", str(app)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (f"the {engine} engine needs {package}, which is not installed (pip install "
            f"'polybus[{engine}]')") in err, err
    # and it ends as every other check error does (it ended with the error alone)
    assert err.splitlines()[-1] == f"1 problem(s) found checking {app}", err


class _InitRay:
    """Ray's init, shutdown and is_initialized, recorded (nothing started)."""

    def __init__(self, fails: Exception | None = None) -> None:
        self.inits: list[dict[str, Any]] = []
        self.fails = fails
        self.down = False

    def init(self, **kw: Any) -> None:
        self.inits.append(kw)
        if self.fails is not None:
            raise self.fails

    def shutdown(self) -> None:
        self.down = True


def _bare(tmp_path: Path, ray: _InitRay) -> RayEngine:
    engine = RayEngine.__new__(RayEngine)
    engine.app = load(write_one_call_app(tmp_path))
    engine.ray, engine.echo, engine.actors, engine.registry = ray, None, {}, None
    engine._own_ray, engine._session_dir = False, None
    engine._outputs, engine.follower, engine._unroute = {}, None, None
    return engine


def test_a_ray_address_nothing_answers_is_said_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Ray's own start waited for minutes on it, saying only that its GCS timed out.)"""
    import socket

    with socket.socket() as s:  # a port of this machine's loopback that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    ray = _InitRay()
    with pytest.raises(ConfigError) as info:
        _bare(tmp_path, ray)._init(1)
    assert ray.inits == []  # Ray was never asked
    assert info.value.key == "cluster.engine"
    assert f"'127.0.0.1:{port}' cannot be reached" in str(info.value)
    assert "RAY_ADDRESS" in str(info.value.hint)


def test_a_ray_address_ray_cannot_use_is_said_with_its_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    ray = _InitRay(ConnectionError("Could not find any running Ray instance."))
    with pytest.raises(ConfigError, match="'auto' cannot be reached: Could not find any"):
        _bare(tmp_path, ray)._init(1)


def test_a_private_ray_keeps_its_files_in_the_runs_directory_removed_at_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = _InitRay()
    engine = _bare(tmp_path, ray)
    engine._init(2)
    (kw,) = ray.inits
    session = Path(kw["_temp_dir"])
    assert kw["address"] == "local" and session.is_dir()
    (session / "session_1").mkdir()  # as Ray leaves it
    engine.stop()
    assert ray.down and not session.exists()


def test_a_private_ray_started_with_an_outward_address_up_is_warned_of(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """(Ray binds its daemons to the host's outward address whatever it is told: the
    run said nothing of it, and the README said everything binds to loopback.)"""
    from polybus.engines import ray as engine_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for up, warned in ((["eth0"], True), ([], False)):
        monkeypatch.setattr(engine_ray, "outward_interfaces", lambda up=up: up)
        caplog.clear()
        engine = _bare(tmp_path, _InitRay())
        try:
            engine._init(1)
        finally:
            engine.stop()
        said = [r.getMessage() for r in caplog.records if "outward address" in r.getMessage()]
        assert bool(said) == warned, said
        if warned:
            assert "(eth0 up)" in said[0] and "unshare -n" in said[0]
            assert "RAY_ADDRESS" in said[0]


def test_outward_interfaces_are_those_up_and_not_loopback() -> None:
    from polybus.engines.rayout import outward

    up, loop = 0x1, 0x8
    assert outward([("lo", up | loop), ("eth0", up | 0x1000), ("eth1", 0x1000),
                    ("wlan0", up)]) == ["eth0", "wlan0"]


def test_outward_interfaces_are_asked_of_this_network_namespace() -> None:
    """Inside ``unshare -n`` (lo alone) there are none: /sys/class/net, read first,
    showed the host's interfaces there too (it is the namespace sysfs was mounted in)."""
    import subprocess
    import sys

    from polybus.bench.peers._driver import loopback_only_prefix

    prefix = loopback_only_prefix()
    if not prefix:
        pytest.skip("no private network namespace permitted here")
    said = subprocess.run([*prefix, sys.executable, "-c", "from polybus.engines.rayout "
                           "import outward_interfaces as o; print(o())"],
                          capture_output=True, text=True, timeout=60)
    assert said.returncode == 0 and said.stdout == "[]\n", said


class _Dispatch:
    """Ray's driver module as `route_prints` sees it: ``print_to_stdstream``."""

    def __init__(self) -> None:
        self.printed: list[dict[str, Any]] = []
        self.print_to_stdstream = self._print
        self.original = self.print_to_stdstream

    def _print(self, data: dict[str, Any], ignore_prefix: bool = False) -> None:
        self.printed.append(data)


def test_ray_prints_go_to_the_worker_output_or_stderr_never_stdout() -> None:
    """On a joined cluster Ray forwards an actor's lines through one function, which
    wrote its stdout lines to sys.stdout, and its own messages ("(raylet) A worker
    died ...") there too: an actor's lines now go to the run's worker output in the
    local engine's form, the rest to stderr (``is_err``) as Ray writes them."""
    import io

    from polybus.engines.rayout import route_prints

    ray, echo = _Dispatch(), io.StringIO()
    restore = route_prints(ray, echo)
    ray.print_to_stdstream({"lines": ["a", "polybus worker server-0: serving tcp://x"],
                            "actor_name": "server-0", "pid": 7, "is_err": False})
    ray.print_to_stdstream({"lines": ["A worker died"], "pid": "raylet", "is_err": False})
    assert echo.getvalue() == "(server-0) a\n"  # (the banner left out, as logfollow's)
    assert ray.printed == [{"lines": ["A worker died"], "pid": "raylet", "is_err": True}]
    restore()
    assert ray.print_to_stdstream == ray.original
    quiet = route_prints(ray, None)  # (--no-worker-output: an actor's lines dropped)
    ray.print_to_stdstream({"lines": ["b"], "actor_name": "server-0", "pid": 7})
    assert len(ray.printed) == 1
    quiet()


_DAEMON = """\
import os, sys, time
logs = os.path.join(sys.argv[1], "session_1", "logs", "events")
while True:  # (as Ray's GCS starting: it makes its log directories as it goes)
    os.makedirs(logs, exist_ok=True)
    open(os.path.join(logs, "event_GCS.log"), "a").close()
    time.sleep(0.001)
"""


class _DaemonRay(_InitRay):
    """A private Ray whose one daemon (its command line names the Ray directory, as
    Ray's do) goes on writing there after ``shutdown`` returned, as Ray's did."""

    def __init__(self, fails: BaseException | None = None) -> None:
        super().__init__()
        self.daemon: Any = None
        self.cut = fails

    def init(self, **kw: Any) -> None:
        import subprocess
        import sys
        import time

        self.inits.append(kw)
        self.daemon = subprocess.Popen([sys.executable, "-c", _DAEMON, kw["_temp_dir"]])
        deadline = time.monotonic() + 30
        while not (Path(kw["_temp_dir"]) / "session_1").is_dir():  # (it writes)
            assert self.daemon.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        if self.cut is not None:
            raise self.cut


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_private_rays_daemons_have_ended_before_its_directory_goes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut_short: bool) -> None:
    """(A run stopped while Ray started left its directory behind: Ray's GCS, still
    running, made its log directories again after the run removed them. ``shutdown``
    too returns before Ray's daemons have ended.)"""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray = _DaemonRay(SystemExit(15) if cut_short else None)  # (Ray's SIGTERM handler's)
    engine = _bare(tmp_path, ray)
    try:
        if cut_short:
            with pytest.raises(SystemExit):
                engine._init(1)
        else:
            engine._init(1)
        session = Path(ray.inits[0]["_temp_dir"])
        engine.stop()
        assert ray.daemon.poll() is not None, "a daemon of the run's Ray still runs"
        assert not session.exists(), sorted(session.rglob("*"))
    finally:
        if ray.daemon is not None and ray.daemon.poll() is None:
            ray.daemon.kill()
        if ray.daemon is not None:
            ray.daemon.wait()
        for kw in ray.inits:  # (what a failed run left, in /tmp)
            shutil.rmtree(kw["_temp_dir"], ignore_errors=True)


def test_only_the_runs_own_processes_naming_its_directory_are_ended(tmp_path: Path) -> None:
    # A process of the user's own that names the directory (a `tail -f` of a log there,
    # started by someone else: here a grandchild reparented away) is never told to end;
    # the run's own descendant is.
    from polybus.engines.rayend import naming

    d = tmp_path / "polybus-ray-x"
    d.mkdir()
    mine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(d)])
    # (a process that is not this one's descendant: its parent exits at once, so init
    # or a subreaper adopts it)
    out = subprocess.run([sys.executable, "-c", (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)', sys.argv[1]], start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid)"), str(d)], capture_output=True, text=True, check=True)
    stranger = int(out.stdout)
    try:
        deadline = time.monotonic() + 10
        for pid in (mine.pid, stranger):  # (both naming it, before it is asked)
            while str(d).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                assert time.monotonic() < deadline
                time.sleep(0.01)
        assert naming(str(d)) == [mine.pid]
    finally:
        mine.kill()
        mine.wait()
        try:
            os.kill(stranger, signal.SIGKILL)  # (started by this test, through a child)
        except ProcessLookupError:
            pass
