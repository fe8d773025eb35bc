"""--set of `polybus worker` and `polybus registry` overrides a key of --config; with no
--config it is refused (status 2), never dropped unsaid: `worker --module FILE --set
cluster.max_frame=1MiB` served with 1 GiB frames, and `registry --set` was an unknown
argument."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polybus.cli.main import main
from polybus.worker.main import Stopped


def _app(tmp_path: Path) -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    app.write_text('[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


def _never_served(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("polybus.worker.main.serve",
                        lambda **kw: seen.update(kw) or Stopped(None, 0))
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    return seen


def test_worker_module_with_set_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _app(tmp_path)
    seen = _never_served(monkeypatch)
    got = main(["worker", "--registry", "127.0.0.1:1", "--module", str(tmp_path / "server.py"),
                "--set", "cluster.max_frame=1MiB"])
    assert got == 2 and seen == {}
    err = capsys.readouterr().err
    assert err.startswith("polybus worker: error: --set cluster.max_frame=1MiB: --set "
                          "overrides a key of --config, and --module serves with no "
                          "configuration"), err
    assert "--config FILE --as KEY" in err


def test_worker_config_applies_set_to_the_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(tmp_path)
    seen = _never_served(monkeypatch)
    assert main(["worker", "--registry", "127.0.0.1:1", "--config", str(app), "--as",
                 "server", "--set", "cluster.max_frame=1MiB",
                 "--listen", "tcp://127.0.0.1:0"]) == 0
    assert seen["max_frame"] == 1 << 20


def test_worker_help_says_set_needs_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    assert "only with --config" in " ".join(capsys.readouterr().out.split())


def test_registry_set_without_config_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "--set", "cluster.heartbeat=0.2"]) == 2
    assert capsys.readouterr().err.startswith(
        "polybus registry: error: --set cluster.heartbeat=0.2: --set overrides a key of "
        "--config, and no --config was given")


class _Stopped:
    """The registry's wait for a signal, over at once."""

    signum = None  # (no signal came: nothing said, status 0)

    def __init__(self, signals: object) -> None:
        pass

    def wait(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_registry_set_overrides_its_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli import cmd_registry

    app = _app(tmp_path)
    seen: dict[str, Any] = {}
    real = cmd_registry.RegistryService

    def service(token: bytes, listen: str, ttl: float, say: Any = None) -> Any:
        seen["ttl"] = ttl
        return real(token, listen, ttl=ttl, say=say)

    monkeypatch.setattr(cmd_registry, "RegistryService", service)
    monkeypatch.setattr(cmd_registry, "StopSignals", _Stopped)
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    assert main(["registry", "--config", str(app), "--set", "cluster.heartbeat=0.2"]) == 0
    assert seen["ttl"] == pytest.approx(0.6)  # three of the heartbeat --set gave
    assert "polybus registry listening on 127.0.0.1:" in capsys.readouterr().out
    # A mistake in it is said as --set's, as run says it
    assert main(["registry", "--config", str(app), "--set", "cluster.heartbeet=0.2"]) == 2
    assert "did you mean 'heartbeat'?" in capsys.readouterr().err


def test_worker_module_with_config_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """--module beside --config --as: one of them was dropped unsaid (the worker served
    the configuration's module, whatever file --module named)."""
    app = _app(tmp_path)
    (tmp_path / "other.py").write_text("def g(x):\n    return x\n")
    seen = _never_served(monkeypatch)
    got = main(["worker", "--registry", "127.0.0.1:1", "--config", str(app), "--as", "server",
                "--module", str(tmp_path / "other.py")])
    assert got == 2 and seen == {}
    err = capsys.readouterr().err
    assert err.startswith(f"polybus worker: error: --module {tmp_path / 'other.py'}: "
                          "give --module FILE or --config FILE --as KEY, not both"), err


def test_worker_as_without_config_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """--as with --module and no --config: it was dropped unsaid, the worker serving the
    file's stem as its module key whatever --as said."""
    _app(tmp_path)
    seen = _never_served(monkeypatch)
    got = main(["worker", "--registry", "127.0.0.1:1", "--module", str(tmp_path / "server.py"),
                "--as", "kv"])
    assert got == 2 and seen == {}
    err = capsys.readouterr().err
    assert err.startswith("polybus worker: error: --as kv: --as names a module of --config, "
                          "and no --config was given"), err
