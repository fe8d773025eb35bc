"""A registry on IPv6 loopback, started by hand, and workers and a run given its address
bracketed (``[::1]:PORT``, ``tcp://[::1]:PORT``) or zone-scoped (``[::1%1]:PORT``, the
interface's number): `polybus registry` says its address in the form ``--registry``
takes (it printed ``::1:PORT``, which the check refused), and the check takes what the
transport dials. On loopback only; skipped on a machine with no IPv6 loopback."""

from __future__ import annotations

import socket

import pytest

from integration.conftest import EXAMPLES, Procs, cli, read_line

SORT = EXAMPLES / "sort"
ENV = {"POLYBUS_TOKEN": "ipv6-token-" + "v" * 24}


def _no_ipv6_loopback() -> str | None:
    if not socket.has_ipv6:
        return "this Python has no IPv6"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError as exc:
        return f"no IPv6 loopback here (binding ::1: {exc.strerror or exc})"
    return None


pytestmark = pytest.mark.skipif(bool(_no_ipv6_loopback()), reason=_no_ipv6_loopback() or "")


def test_workers_and_a_run_reach_a_registry_on_ipv6_loopback(procs: Procs) -> None:
    reg = procs.start("registry", "--listen", "[::1]:0", env=ENV)
    assert reg.stdout is not None
    addr = read_line(reg.stdout, r"listening on (\S+)").group(1)
    port = int(addr.rpartition(":")[2])
    assert addr == f"[::1]:{port}"  # (as --registry takes it)
    zoned = f"tcp://[::1%{socket.if_nametoindex('lo')}]:{port}"
    for name, at in (("server-0", addr), ("server-1", zoned)):
        w = procs.start("worker", "--registry", at, "--module", SORT / "server.py",
                        "--name", name, env=ENV)
        assert w.stderr is not None
        read_line(w.stderr, "serving")  # (printed once registered)
    p = cli("run", SORT / "app.toml", "--registry", f"tcp://{addr}", "--quiet",
            "--set", "modules.client.args=[3000, 2]", env=ENV)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout, p.stdout
