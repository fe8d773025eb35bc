"""A replica of the mpi or ray engine (engines/served.py, `serve_replica`, which both
call) that finds a mistake of the configuration as it starts says it at the file and
line that wrote the key, as a worker of the local engine does (`config.placed`): its
certificate checked against the host it registers (a rank on another host, whose
certificate does not name it), and a loopback listen_host on a host other than the
client's. They came as ``cluster.tls.cert: ...``, no file, and ``app.toml:
cluster.listen_host: ...``, no line.

Each case runs in a child process: `worker.main.serve` sets process-wide state (stdout
line-buffered, the module imported). The rank's host is made another by patching
``socket.gethostname`` there, as a rank of a launch across hosts has it. Ray itself is
not needed: its actors call the same function (test_security_tls_check.py shows the
configuration these certificates pass at load)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_security_tls import make_ca, make_leaf  # tests/unit

from polybus.testing.apps import write_one_call_app

SERVE = """\
import socket, sys
from polybus.config import load
from polybus.engines import served
from polybus.errors import ConfigError

app = load(sys.argv[1])
[(module, replica)] = served.replicas_in_order(app)
socket.gethostname = lambda: sys.argv[2]  # (a rank on that host)
try:
    served.serve_replica(app, module, replica, registry="127.0.0.1:9", token=b"t" * 32,
                         client_host=sys.argv[3], here=sys.argv[2], on_serving=print)
except ConfigError as exc:
    print(exc)
"""


def _serve(app: Path, here: str, client_host: str) -> str:
    p = subprocess.run([sys.executable, "-c", SERVE, str(app), here, client_host],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "POLYBUS_TOKEN": "t" * 32})
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def _line(app: Path, start: str) -> int:
    lines = app.read_text().splitlines()
    return next(i for i, x in enumerate(lines, 1) if x.startswith(start))


@pytest.mark.skipif(shutil.which("openssl") is None,
                    reason="needs the openssl command to make a test CA")
@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_a_certificate_that_does_not_name_the_ranks_host_is_said_at_its_line(
        tmp_path: Path, engine: str) -> None:
    make_ca(tmp_path, "ca")
    make_leaf(tmp_path, "ca", "named", f"DNS:{socket.gethostname()}")
    app = write_one_call_app(tmp_path, tail=(
        f'[cluster]\nengine = "{engine}"\nlisten_host = "0.0.0.0"\n'
        'tls = { cert = "named.pem", key = "named.key", ca = "ca.pem" }\n'))
    said = _serve(app, "node3.example.org", "node1.example.org")
    assert said.startswith(f"{app}:{_line(app, 'tls = ')}: cluster.tls.cert: the certificate "
                           f"{tmp_path}/named.pem does not name node3.example.org"), said
    # (what sets the host a rank or an actor registers: its configuration, as no
    # --listen of a worker started by hand does)
    assert said.endswith('; with listen_host = "0.0.0.0" each replica registers its own '
                         "host, which the certificate on that host must name; or set "
                         "[cluster] listen_host to a host the certificate names)"), said
    assert "--listen" not in said, said


def test_a_loopback_listen_host_on_another_host_is_said_at_its_line(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, tail='[cluster]\nengine = "mpi"\n'
                                            'listen_host = "127.0.0.1"\n')
    said = _serve(app, "node3.example.org", "node1.example.org")
    assert said.startswith(f"{app}:{_line(app, 'listen_host = ')}: cluster.listen_host: "
                           "this replica is on node3.example.org, the client on "
                           "node1.example.org"), said
