"""With ``[cluster] tls``, a registry and a worker started by hand say at start that
they speak mutual TLS: they said only where they listen, the same words as without it,
and a user could not tell from their output that TLS was on. Certificates from a CA
the test makes (openssl CLI); skipped without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_security_tls import make_pki  # tests/unit

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")


def _line(stream: object, want: str, timeout: float = 30.0) -> str:
    """The first line of ``stream`` (a pipe of a process) containing ``want``."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        raw = stream.readline()  # type: ignore[attr-defined]
        if not raw:
            break
        line = raw.decode()
        seen.append(line)
        if want in line:
            return line
    raise AssertionError(f"no line with {want!r} in {seen}")


def _end(p: subprocess.Popen[bytes]) -> None:
    """End ``p`` (a process this test started) and close its pipes."""
    if p.poll() is None:
        p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for pipe in (p.stdout, p.stderr):
        if pipe is not None:
            pipe.close()


def _app(tmp_path: Path, pki: Path, tls: bool) -> Path:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return 0\n")
    app = tmp_path / "app.toml"
    cluster = (f'[cluster]\ntls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", '
               f'ca = "{pki}/ca.pem" }}\n\n') if tls else ""
    app.write_text(cluster + '[modules.server]\nsource = "server.py"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n')
    return app


@pytest.mark.parametrize("tls", [True, False])
def test_a_registry_and_a_worker_say_when_they_speak_mutual_tls(
        tmp_path: Path, tls: bool) -> None:
    (tmp_path / "pki").mkdir()
    pki = make_pki(tmp_path / "pki") if tls else tmp_path
    app = _app(tmp_path, pki, tls)
    env = dict(os.environ, POLYBUS_TOKEN="banner-token-" + "b" * 20)
    py = [sys.executable, "-m", "polybus"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        reg = subprocess.Popen([*py, "registry", "--config", str(app), "--listen",
                                "127.0.0.1:0"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
        procs.append(reg)
        first = _line(reg.stdout, "listening on")
        addr = first.split()[-1]  # (the address stays the line's last word)
        w = subprocess.Popen([*py, "worker", "--registry", addr, "--config", str(app),
                              "--as", "server", "--name", "s0"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(w)
        banner = _line(w.stderr, "serving")
        assert " at tcp://127.0.0.1:" in banner, banner
        assert ("mutual TLS" in banner) is tls, banner
        reg.terminate()  # (its last lines: what it said after the first)
        reg.wait(timeout=30)
        assert reg.stdout is not None
        said = reg.stdout.read().decode()  # (what readline buffered too)
        if tls:
            assert ("polybus registry: mutual TLS on every connection ([cluster] tls of "
                    f"{app}); the token handshake runs inside it") in said, said
        else:
            assert "TLS" not in first + said, first + said
    finally:
        for p in procs:  # (only what this test started)
            _end(p)


def test_a_registry_on_a_unix_socket_says_no_tls_and_its_address(tmp_path: Path) -> None:
    """[cluster] tls is for tcp: a registry listening at ipc:// speaks plain over its Unix
    socket (endpoints.authenticate), and it said `mutual TLS on every connection`, after
    `listening on :0` (a host and port it has not)."""
    (tmp_path / "pki").mkdir()
    app = _app(tmp_path, make_pki(tmp_path / "pki"), True)
    where = f"ipc://{tmp_path}/registry.sock"
    env = dict(os.environ, POLYBUS_TOKEN="banner-token-" + "b" * 20)
    reg = subprocess.Popen([sys.executable, "-m", "polybus", "registry", "--config",
                            str(app), "--listen", where], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    try:
        first = _line(reg.stdout, "listening on")
        assert first.split()[-1] == where, first
        reg.terminate()
        reg.wait(timeout=30)
        assert reg.stdout is not None
        said = reg.stdout.read().decode()
        assert "TLS" not in first + said, first + said
    finally:
        _end(reg)
