"""A listen_host other hosts can reach, without [cluster] tls, is noted: the token
handshake keeps strangers out, but what crosses the network is not encrypted (it ran
silently on 0.0.0.0 in plain TCP). Loopback, or TLS, says nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import load


def _notes(tmp_path: Path, cluster: str) -> list[str]:
    (tmp_path / "s.py").write_text("def f():\n    return 1\n")
    (tmp_path / "c.py").write_text("from polybus import use\nf = use('f')\n\ndef main():\n"
                                   "    return f()\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "s.py"\n[modules.client]\nsource = "c.py"\n'
        f'entrypoint = "main"\n[bind]\n"client.f" = "server.f"\n[cluster]\n{cluster}\n')
    return [str(n) for n in load(tmp_path / "app.toml").notes]


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::"])
def test_a_host_others_reach_without_tls_is_noted(tmp_path: Path, host: str) -> None:
    (note,) = [n for n in _notes(tmp_path, f'listen_host = "{host}"') if "listen_host" in n]
    assert "unencrypted" in note and "[cluster] tls" in note


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_loopback_says_nothing(tmp_path: Path, host: str) -> None:
    assert not [n for n in _notes(tmp_path, f'listen_host = "{host}"') if "listen_host" in n]
