"""`polybus registry --config` drops a worker after three of the configuration's
heartbeats, as a run's own registry does (it kept a fixed 3 s: with ``heartbeat = 5``
its healthy workers were dropped and registered again over and over, and a third of the
runs found no replica). ``--ttl`` still decides when given."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from polybus.cli import cmd_registry


class _Seen(Exception):
    pass


class _Registry:
    def __init__(self, token: bytes, listen: str, ttl: float, say: object = None) -> None:
        raise _Seen(ttl)


def _ttl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, heartbeat: str | None,
         ttl: float | None) -> Any:
    (tmp_path / "s.py").write_text("def f():\n    return 1\n")
    (tmp_path / "c.py").write_text("from polybus import use\nf = use('f')\n\ndef main():\n"
                                   "    return f()\n")
    cluster = f'[cluster]\nheartbeat = "{heartbeat}"\n' if heartbeat else ""
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "s.py"\n[modules.client]\nsource = "c.py"\n'
        'entrypoint = "main"\n[bind]\n"client.f" = "server.f"\n' + cluster)
    monkeypatch.setattr(cmd_registry, "RegistryService", _Registry)
    monkeypatch.setenv("POLYBUS_TOKEN", "registry-ttl-token-" + "t" * 20)
    args = argparse.Namespace(listen="127.0.0.1:0", token_file=None, ttl=ttl,
                              config=str(tmp_path / "app.toml"), set=[])
    with pytest.raises(_Seen) as seen:
        cmd_registry.main(args)
    return seen.value.args[0]


def test_three_heartbeats_of_the_configuration(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ttl(tmp_path, monkeypatch, "5s", None) == 15.0


def test_ttl_given_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ttl(tmp_path, monkeypatch, "5s", 2.0) == 2.0


def test_the_default_heartbeat_gives_three_seconds(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ttl(tmp_path, monkeypatch, None, None) == 3.0


def test_a_tiny_ttl_does_not_spin_the_registry_s_looks() -> None:
    """``--ttl 1us`` is a duration > 0, taken; the registry's looks (every ttl / 6) then
    waited a fraction of a microsecond each: a CPU spun. They come at most every
    LOOK_MIN_S now (counted over the time the registry ran: an upper bound that a slow
    machine only lowers)."""
    import time

    from polybus.registry import service

    looks = 0
    with service.RegistryService(b"t" * 32, ttl=1e-6) as reg:
        real = reg.state.expire

        def counted(now: float) -> Any:
            nonlocal looks
            looks += 1
            return real(now)

        reg._say = lambda line: None  # (the looks expire replicas only with a say)
        reg.state.expire = counted  # type: ignore[method-assign]
        t0 = time.monotonic()
        time.sleep(0.3)
        ran = time.monotonic() - t0
    assert looks <= ran / service.LOOK_MIN_S + 2, (looks, ran)
