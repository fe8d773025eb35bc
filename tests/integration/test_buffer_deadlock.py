"""The buffer deadlock Schnaidt, Duman and Lewis met: a client that sends every call
before it reads any answer, to a server whose answers fill the client's receive buffer
while the client is still writing. polybus's client reads while a send would block
(docs/design.md, "Caller-driven client"), so the run ends with every answer. (Over a
socket: under `shm` the arrays and bytes travel in shared memory, not in its buffers.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus

SERVER = "def echo(x):\n    return x\n"
CLIENT = """from polybus import use, wait

echo = use("echo")


def main(n, size):
    payload = bytes(range(256)) * (size // 256)
    sent = [echo(payload) for _ in range(n)]   # all of them before any answer is read
    return [len(v) == len(payload) and v[:256] == payload[:256] for v in wait(sent)]
"""
APP = """[modules.server]
source = "server.py"
replication = 1
transport = "{transport}"
define.echo = {{ queue = 1, pool = 1 }}

[modules.client]
source = "client.py"
entrypoint = "main"
args = [{n}, {size}]
use.echo = {{ callstyle = "async" }}

[bind]
"client.echo" = "server.echo"
"""


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_worker_left")
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_a_client_that_sends_everything_before_it_reads_ends(
        tmp_path: Path, transport: str) -> None:
    # 160 MiB each way: beyond what both directions' socket buffers hold together
    # (loopback TCP grows a receive buffer up to 32 MiB here: 48 MiB passed without
    # the client reading while it sends)
    n, size = 160, 1 << 20
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    app = tmp_path / "app.toml"
    app.write_text(APP.format(transport=transport, n=n, size=size))
    try:
        r = polybus.run(app, timeout=50, worker_output=False)
    except polybus.RunTimeout as exc:  # (a KeyboardInterrupt: it would end the session)
        pytest.fail(f"client and replica waited on each other's full buffers: {exc}")
    assert r.result == [True] * n
    assert r.bytes_received >= n * size
