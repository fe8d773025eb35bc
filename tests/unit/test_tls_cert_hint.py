"""The hint of a certificate that does not name the host a worker registers says what
set that host where the worker was started: ``--listen`` for one started by hand with
it, ``[cluster] listen_host`` for one that listens where its configuration says (by
hand with --config and no --listen, or started by the local engine, which gives it
--listen from listen_host). It said "or give --listen a host the certificate names" to
every one (an MPI rank's and a Ray actor's: test_served_error_placed.py).

Each case is a `polybus worker` process of its own: serving sets process-wide state."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_security_tls import make_pki  # tests/unit

from polybus.testing.apps import write_one_call_app

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="needs the openssl command to make a test CA")

LISTEN = "; or give --listen a host the certificate names)"
LISTEN_HOST = "; or set [cluster] listen_host to a host the certificate names)"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _worker(pki: Path, tmp_path: Path, *more: str) -> str:
    """A worker of a file whose certificate names node2.example.org only, listening at
    127.0.0.1: the error line it ends with (nothing registers: it stops before)."""
    app = write_one_call_app(tmp_path, tail=(
        '[cluster]\nlisten_host = "127.0.0.1"\n'
        f'tls = {{ cert = "{pki}/node2.pem", key = "{pki}/node2.key", ca = "{pki}/ca.pem" }}\n'))
    p = subprocess.run([sys.executable, "-m", "polybus", "worker", "--registry",
                        "127.0.0.1:9", "--config", str(app), "--as", "server", *more],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                       env={**os.environ, "POLYBUS_TOKEN": "t" * 32})
    assert p.returncode == 2, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if "does not name 127.0.0.1" in x]
    return line


def test_a_worker_given_listen_by_hand_is_told_of_listen(pki: Path, tmp_path: Path) -> None:
    said = _worker(pki, tmp_path, "--listen", "tcp://127.0.0.1:0")
    assert said.endswith(LISTEN), said


def test_a_worker_of_the_files_listen_host_is_told_of_the_key(
        pki: Path, tmp_path: Path) -> None:
    said = _worker(pki, tmp_path)
    assert said.endswith(LISTEN_HOST), said
    assert "--listen" not in said, said


def test_a_worker_the_local_engine_started_is_told_of_the_key(
        pki: Path, tmp_path: Path) -> None:
    """(The engine gives it --listen, made from listen_host: the user wrote only that.)"""
    said = _worker(pki, tmp_path, "--listen", "tcp://127.0.0.1:0", "--exit-with-parent",
                   "--parent", str(os.getpid()))
    assert said.endswith(LISTEN_HOST), said
    assert "--listen" not in said, said
