"""`polybus registry --config` given no --listen listens at the configuration's
[cluster] registry, else at its listen_host on a free port (it listened on 127.0.0.1
whatever listen_host said, while a worker of the same file listens there)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from polybus.cli import cmd_registry


class _Seen(Exception):
    pass


class _Registry:
    def __init__(self, token: bytes, listen: str, ttl: float, say: object = None) -> None:
        raise _Seen(listen)


def _listen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cluster: str,
            listen: str | None = None, config: bool = True) -> str:
    (tmp_path / "s.py").write_text("def f():\n    return 1\n")
    (tmp_path / "c.py").write_text("from polybus import use\nf = use('f')\n\ndef main():\n"
                                   "    return f()\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "s.py"\n[modules.client]\nsource = "c.py"\n'
        f'entrypoint = "main"\n[bind]\n"client.f" = "server.f"\n[cluster]\n{cluster}\n')
    monkeypatch.setattr(cmd_registry, "RegistryService", _Registry)
    monkeypatch.setenv("POLYBUS_TOKEN", "registry-listen-token-" + "t" * 20)
    args = argparse.Namespace(listen=listen, token_file=None, ttl=None,
                              config=str(tmp_path / "app.toml") if config else None, set=[])
    with pytest.raises(_Seen) as seen:
        cmd_registry.main(args)
    return str(seen.value.args[0])


def test_the_files_listen_host_on_a_free_port(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert _listen(tmp_path, monkeypatch, 'listen_host = "0.0.0.0"') == "tcp://0.0.0.0:0"


def test_the_files_registry_first_and_listen_given_before_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    both = 'listen_host = "0.0.0.0"\nregistry = "127.0.0.1:7700"'
    assert _listen(tmp_path, monkeypatch, both) == "tcp://127.0.0.1:7700"
    assert _listen(tmp_path, monkeypatch, both, "127.0.0.1:0") == "tcp://127.0.0.1:0"


def test_loopback_without_either(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _listen(tmp_path, monkeypatch, "") == "tcp://127.0.0.1:0"
    assert _listen(tmp_path, monkeypatch, "", config=False) == "tcp://127.0.0.1:0"
