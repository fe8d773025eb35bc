"""Engines a configuration names: refused clearly when they cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigError

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_engines_not_built_are_a_config_error_not_a_silent_local_run(engine: str) -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": engine})
    assert info.value.key == "cluster.engine"
    assert engine in str(info.value)


def test_hosts_engine_without_a_registry_says_what_is_missing() -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": "hosts"})
    assert info.value.key == "cluster.registry"


def test_an_interrupt_while_workers_start_leaves_no_process_or_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing in the middle of starting the second worker: the first is stopped,
    and neither log (the second's made before its process) is left behind."""
    import subprocess
    import tempfile

    from polybus.config import load
    from polybus.engines import local
    from polybus.engines.local import LocalEngine

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
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
    assert not list(tmp_path.glob("polybus-*"))
