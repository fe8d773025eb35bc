"""A worker started by hand with --config listens where the configuration's [cluster]
listen_host says (it listened on 127.0.0.1 whatever the file said), and says so in its
banner; a run through the registry reaches it there. (127.0.0.2: another loopback
address, so that the file's host is told from the default without leaving the host.)"""

from __future__ import annotations

from pathlib import Path

from integration.conftest import EXAMPLES, Procs, cli, read_line, start_registry
from polybus.registry.client import RegistryClient

SORT = EXAMPLES / "sort"


def test_a_configured_worker_listens_at_the_files_listen_host(
        procs: Procs, tmp_path: Path) -> None:
    token = "listen-host-token-" + "l" * 20
    env = {"POLYBUS_TOKEN": token}
    app = tmp_path / "app.toml"
    app.write_text('[cluster]\nlisten_host = "127.0.0.2"\n\n'
                   + (SORT / "app.toml").read_text()
                   .replace('"server.py"', f'"{SORT}/server.py"')
                   .replace('"client.py"', f'"{SORT}/client.py"'))
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                    "--name", "server-0", env=env)
    assert w.stderr is not None
    banner = read_line(w.stderr, "serving .*").group(0)
    assert " at tcp://127.0.0.2:" in banner, banner
    assert banner.endswith(f"(listen_host from {app})"), banner
    client = RegistryClient(addr, token.encode())
    try:
        [r] = client.resolve(module="server")
    finally:
        client.close()
    assert r.address.startswith("tcp://127.0.0.2:")
    p = cli("run", app, "--registry", addr, "--quiet",
            "--set", "modules.client.args=[3000, 1]", env=env)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    # --listen given: it, not the file, and the banner names no listen_host.
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                    "--name", "server-1", "--listen", "tcp://127.0.0.1:0", env=env)
    assert w.stderr is not None
    banner = read_line(w.stderr, "serving .*").group(0)
    assert " at tcp://127.0.0.1:" in banner and "listen_host" not in banner, banner
