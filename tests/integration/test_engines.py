"""Engines a configuration names: refused clearly when they cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigError

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_an_engine_that_starts_its_own_registry_refuses_another(engine: str) -> None:
    """(Not a silent run on the named registry's workers, nor on the engine's.)"""
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": engine, "cluster.registry": "127.0.0.1:7700"})
    assert info.value.key == "cluster.registry"
    assert f"the {engine} engine starts its own registry" in str(info.value)


def test_hosts_engine_without_a_registry_says_what_is_missing() -> None:
    """(Found with the configuration, and said where the engine was chosen.)"""
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": "hosts"})
    assert (info.value.file, info.value.key) == ("overrides", "cluster.engine")
    assert "it needs their registry" in str(info.value)
    assert "cluster.registry" in str(info.value.hint)


def test_an_interrupt_while_workers_start_leaves_no_process_or_log(
        short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing in the middle of starting the second worker: the first is stopped,
    and neither log (the second's made before its process) is left behind."""
    import subprocess
    import tempfile

    from polybus.config import load
    from polybus.engines import local
    from polybus.engines.local import LocalEngine

    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    started: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    def popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        if started:
            raise KeyboardInterrupt
        started.append(real(*args, **kwargs))  # type: ignore[call-overload]
        return started[0]
    monkeypatch.setattr(local.subprocess, "Popen", popen)
    engine = LocalEngine(load(APP, ("modules.server.replication=2",)))
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.start()
    finally:
        engine.stop()  # (a no-op when start stopped it; else nothing outlives the test)
    assert len(started) == 1 and started[0].poll() is not None  # stopped, and reaped
    assert not list(short_tmp.glob("polybus-*"))


def test_the_next_run_removes_a_dead_runs_directory_and_nothing_else(
        short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run SIGKILLed leaves its directory (its workers' logs, its socket files) in
    $TMPDIR: ``polybus-<its pid>-<random>``, holding a mark that names that pid. The next
    run's engine removes it, and only what it can tell is such a directory whose run is
    gone: not one of a live process, nor one without the mark or whose mark names
    another pid, nor a file or a link of that name, nor anything else there."""
    import os
    import subprocess
    import tempfile

    from polybus.config import load
    from polybus.engines.local import LocalEngine

    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    gone = subprocess.Popen(["true"])
    gone.wait()  # (reaped: its pid names no process now)
    dead, live = gone.pid, os.getpid()

    def rundir(name: str, mark: str | None) -> Path:
        d = short_tmp / name
        d.mkdir(mode=0o700)
        if mark is not None:
            (d / "polybus-run").write_text(mark)
        (d / "server-0.log").write_text("a line\n")
        return d

    stale = rundir(f"polybus-{dead}-a1b2c3d4", f"{dead}\n")
    # A run killed between making its directory and writing its mark left it empty
    # (seen after a test session): empty, it goes too; one of a live pid stays.
    empty = short_tmp / f"polybus-{dead}-empty000"
    empty.mkdir(mode=0o700)
    (short_tmp / f"polybus-{live}-empty111").mkdir(mode=0o700)
    kept = [
        rundir(f"polybus-{live}-e5f6g7h8", f"{live}\n"),   # its run is alive (this one)
        rundir(f"polybus-{dead}-nomark00", None),           # not shown to be polybus's
        rundir(f"polybus-{dead}-otherpid", "1\n"),          # the mark names another pid
        rundir("polybus-x-a1b2c3d4", f"{dead}\n"),          # not a pid
        rundir("other", f"{dead}\n"),
    ]
    target = rundir("target", f"{dead}\n")
    (short_tmp / f"polybus-{dead}-alink000").symlink_to(target)
    (short_tmp / f"polybus-{dead}-afile000").write_text(f"{dead}\n")
    (short_tmp / "polybus-server-0-abcd1234.log").write_text("an older run's log\n")
    before = sorted(p.name for p in short_tmp.iterdir())

    engine = LocalEngine(load(APP))
    try:
        engine.start()
        assert not stale.exists() and not empty.exists()
        assert all((d / "server-0.log").exists() for d in [*kept, target])
    finally:
        engine.stop()
    assert sorted(p.name for p in short_tmp.iterdir()) == [
        n for n in before if n not in (stale.name, empty.name)]


BLAS_SERVER = """\
import os


def f(x):
    return {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "MKL_NUM_THREADS")}
"""


@pytest.mark.parametrize("user_set", [False, True])
def test_local_workers_share_the_cpus_for_blas_unless_the_user_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_set: bool) -> None:
    """Two replicas on this host each get half of its CPUs for BLAS (numpy started a
    thread per CPU in each: 5-20x slower than one replica); a setting of the user's, of
    any of the variables, is left as it is, the others unset."""
    import os

    from polybus.engines.launchenv import BLAS_VARS
    from polybus.testing.apps import write_one_call_app

    for v in BLAS_VARS:
        monkeypatch.delenv(v, raising=False)
    if user_set:
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
    app = write_one_call_app(tmp_path, server_keys="replication = 2", server=BLAS_SERVER,
                             client="from polybus import use\n\nf = use('f')\n\n\n"
                                    "def main():\n    return [f(0), f(1)]\n")
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))
    want = ({"OMP_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": None, "MKL_NUM_THREADS": None}
            if user_set else dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                            "MKL_NUM_THREADS"), share))
    assert polybus.run(app).result == [want, want]
