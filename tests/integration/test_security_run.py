"""Strangers against a whole `polybus run`: mutual TLS end to end, loopback-only
listeners by default, and the token never printed when a run fails."""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from integration.conftest import POLYBUS, Procs, descendants, env_with, read_line
from polybus.testing.apps import write_app
from polybus.wire import handshake

SERVER = """
    def square(x):
        if x < 0:
            raise ValueError("negative input")
        return x * x
"""

# The client holds the run open until the test has looked at its sockets: it writes
# GATE/ready and waits (at most 30 s) for GATE/go.
CLIENT = """
    import os, time
    from polybus import use, wait

    square = use("square")

    def main():
        total = sum(wait([square(i) for i in range(20)]))
        gate = os.environ.get("POLYBUS_TEST_GATE")
        if gate:
            open(os.path.join(gate, "ready"), "w").close()
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(gate, "go")) and time.monotonic() < deadline:
                time.sleep(0.02)
        return total
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.square = {{ callstyle = "async" }}

    [bind]
    "client.square" = "server.square"
    {cluster}
"""

EXPECTED = sum(i * i for i in range(20))


# -- listening sockets, from /proc --------------------------------------------------
def _socket_inodes(pid: int) -> set[int]:
    out = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _host(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc/net/tcp* prints each 32-bit word in host (little-endian) order.
    fixed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(fixed))


def listeners(pids: set[int]) -> list[tuple[int, str, int]]:
    """(pid, host, port) of every listening TCP socket (state 0A) the processes hold."""
    owner = {inode: pid for pid in pids for inode in _socket_inodes(pid)}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A":
                continue
            inode = int(f[9])
            if inode in owner:
                addr, port = f[1].split(":")
                found.append((owner[inode], _host(addr), int(port, 16)))
    return found


def _start_gated(procs: Procs, app: Path, gate: Path,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], set[int]]:
    gate.mkdir()
    run = procs.start("run", app, "--quiet", env={"POLYBUS_TEST_GATE": str(gate), **(env or {})})
    deadline = time.monotonic() + 60
    while not (gate / "ready").exists():
        if run.poll() is not None or time.monotonic() > deadline:
            _, err = run.communicate(timeout=10)
            raise AssertionError(f"the run did not get ready (status {run.poll()}):\n{err}")
        time.sleep(0.02)
    pids = {run.pid} | descendants(run.pid)
    procs.watch(pids)
    return run, pids


def _finish(run: subprocess.Popen[str], gate: Path) -> str:
    (gate / "go").touch()
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    return out


def _greeting(port: int, wait: float = 3.0) -> bytes:
    """What a plain-TCP stranger gets from ``port`` before it sends anything itself."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.settimeout(wait)
        data = b""
        try:
            while len(data) < handshake.HELLO_SIZE:
                chunk = s.recv(handshake.HELLO_SIZE - len(data))
                if not chunk:
                    break
                data += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return data


def _plain_stranger(port: int) -> bytes:
    """A plain-TCP peer that speaks first (bytes a TLS server reads as a bad record)."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.settimeout(5)
        try:
            s.sendall(b"\x00" * handshake.PROOF_SIZE)
            return s.recv(4096)
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            return b""


# -- 7. nothing listens beyond loopback by default ---------------------------------------
def test_a_default_run_listens_on_loopback_only(tmp_path: Path, procs: Procs) -> None:
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT, toml=TOML.format(cluster=""))
    run, pids = _start_gated(procs, app, tmp_path / "gate")
    try:
        found = listeners(pids)
        # the embedded registry (in the run process) and one listener per worker
        assert len({pid for pid, _, _ in found}) >= 3, found
        wild = [(pid, host, port) for pid, host, port in found
                if ipaddress.ip_address(host).is_unspecified]
        assert not wild, f"listening on every interface: {wild}"
        assert all(ipaddress.ip_address(h).is_loopback for _, h, _ in found), found
        # the listing found the real ports: each greets a stranger with the token challenge
        for _, _, port in found:
            assert len(_greeting(port)) == handshake.HELLO_SIZE
    finally:
        out = _finish(run, tmp_path / "gate")
    assert out.strip() == str(EXPECTED)


# -- 7. tls = { cert, key, ca } turns on mutual TLS for every connection ----------------------
def _ossl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _pki(d: Path) -> Path:
    d.mkdir()
    _ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
          "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "node.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                "extendedKeyUsage=serverAuth,clientAuth\n")
    _ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=node",
          "-keyout", "node.key", "-out", "node.csr", cwd=d)
    _ossl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
          "-CAcreateserial", "-days", "2", "-extfile", "node.ext", "-out", "node.pem", cwd=d)
    return d


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_run_with_tls_uses_it_everywhere(tmp_path: Path, procs: Procs) -> None:
    pki = _pki(tmp_path / "pki")
    cluster = (f'[cluster]\ntls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", '
               f'ca = "{pki}/ca.pem" }}')
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT,
                    toml=TOML.format(cluster=cluster))
    run, pids = _start_gated(procs, app, tmp_path / "gate")
    try:
        found = listeners(pids)
        assert len({pid for pid, _, _ in found}) >= 3, found  # registry + 2 workers
        for _, _, port in found:
            # No token challenge in clear, and a plain peer's bytes end the connection.
            assert _greeting(port, 0.5) == b"", f"port {port} spoke plain TCP"
            assert _plain_stranger(port) == b"", f"port {port} answered a plain peer"
    finally:
        out = _finish(run, tmp_path / "gate")
    assert out.strip() == str(EXPECTED)  # workers registered and answered over TLS


# -- 7. tokens never appear in output or error messages ----------------------------------
def _assert_no_token(token: str, *texts: str) -> None:
    for text in texts:
        assert token not in text, f"the token leaked into:\n{text}"


def test_failing_runs_never_print_the_token(tmp_path: Path, procs: Procs) -> None:
    good = "pbtok" + secrets.token_hex(16)
    wrong = "pbbad" + secrets.token_hex(16)
    app = write_app(tmp_path / "app", server=SERVER, toml=TOML.format(cluster=""), client="""
        from polybus import use
        square = use("square")

        def main():
            return square(-1)   # the server raises
    """)
    # A registry and a worker started by hand with the good token.
    reg = procs.start("registry", env={"POLYBUS_TOKEN": good})
    where = read_line(reg.stdout, r"listening on (\S+)").group(1)
    worker = procs.start("worker", "--registry", where, "--config", app, "--as", "server",
                         env={"POLYBUS_TOKEN": good})

    # 1. the wrong token: refused, and neither token is printed by anyone.
    refused = subprocess.run(
        [*POLYBUS, "run", app, "--registry", where], capture_output=True, text=True,
        timeout=60, env=env_with({"POLYBUS_TOKEN": wrong}))
    assert refused.returncode != 0
    assert "token" in refused.stderr.lower()  # it says why
    _assert_no_token(wrong, refused.stdout, refused.stderr)
    _assert_no_token(good, refused.stdout, refused.stderr)

    # 2. a bad configuration, with the token in the environment.
    bad = tmp_path / "bad.toml"
    bad.write_text('[modules.client]\nsource = "nowhere.py"\nentrypoint = 5\n')
    broken = subprocess.run([*POLYBUS, "run", bad], capture_output=True, text=True,
                            timeout=60, env=env_with({"POLYBUS_TOKEN": good}))
    assert broken.returncode != 0 and broken.stderr
    _assert_no_token(good, broken.stdout, broken.stderr)

    # 3. a remote exception through the right token.
    deadline = time.monotonic() + 20
    while True:  # until the worker has registered
        remote = subprocess.run([*POLYBUS, "run", app, "--registry", where],
                                capture_output=True, text=True, timeout=60,
                                env=env_with({"POLYBUS_TOKEN": good}))
        if "no replica" not in remote.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert remote.returncode != 0 and "negative input" in remote.stderr, remote.stderr
    _assert_no_token(good, remote.stdout, remote.stderr)

    # ... nor do the registry and the worker, in what they printed meanwhile.
    for p in (reg, worker):
        p.kill()
        out, err = p.communicate(timeout=10)
        _assert_no_token(good, out, err)
        _assert_no_token(wrong, out, err)

