"""A module that holds over 1,024 descriptors (files it opens as it is imported, a
pool of connections of its own): its worker registers, and it and a client holding as
many serve and call as ever, in plain TCP and under mutual TLS. ``select()`` cannot
watch a descriptor past 1,023 (FD_SETSIZE); the waits on sockets are polls.

*Fixed here:* the worker's registration waited for the registry's answer with
``select()`` and died at start with ``ValueError: filedescriptor out of range in
select()``; under TLS, so did the reading of every connection (transport/tls.py), and a
client's wait for its answers returned at once, its socket never watched."""

from __future__ import annotations

import resource
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

HOLD = 1100  # descriptors each module opens at import: past select()'s 1,024

SERVER = f"""
    import os

    _held = [os.open(os.devnull, os.O_RDONLY) for _ in range({HOLD})]

    def square(x):
        return x * x

    def shifted(a, k):
        return [v + k for v in a]
"""

CLIENT = f"""
    import os
    from polybus import use, wait

    _held = [os.open(os.devnull, os.O_RDONLY) for _ in range({HOLD})]
    square = use("square")
    shifted = use("shifted")

    def main():
        squares = wait([square(i) for i in range(40)])
        shifts = wait([shifted(list(range(20000)), k) for k in range(4)])
        return sum(squares), [sum(s) for s in shifts]
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.square = {{ callstyle = "async" }}
    use.shifted = {{ callstyle = "async-demand(2)" }}

    [bind]
    "client.square" = "server.square"
    "client.shifted" = "server.shifted"
    {cluster}
"""

EXPECTED = (sum(i * i for i in range(40)), [sum(range(20000)) + 20000 * k for k in range(4)])


@pytest.fixture(autouse=True)
def _room_for_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * HOLD
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"needs {want} descriptors a process (the hard limit is {hard})")
    if soft != resource.RLIM_INFINITY and soft < want:  # (the run and its workers inherit it)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_a_module_holding_many_descriptors_serves(tmp_path: Path, tls: bool) -> None:
    cluster = ""
    if tls:
        if shutil.which("openssl") is None:
            pytest.skip("needs the openssl command")
        from integration.tlsmix import make_pki

        pki = make_pki(tmp_path / "pki")
        cluster = (f'[cluster]\ntls = {{ cert = "{pki}/node.pem", key = "{pki}/node.key", '
                   f'ca = "{pki}/ca.pem" }}')
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT,
                    toml=TOML.format(cluster=cluster))
    p = cli("run", app, "--quiet", "--timeout", "40s", timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == repr(EXPECTED), p.stderr[-3000:]
