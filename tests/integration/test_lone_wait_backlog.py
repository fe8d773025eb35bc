"""A program waiting alone on its one replica still places the calls its answers make
room for (an ``async-demand`` backlog).

From a new-user trial: ``f`` async-demand(1), ``g(f(0), f(1))`` async on one replica
with one handler. ``g`` was held at the replica for ``f(1)``'s value, ``f(1)`` waited
in the client's backlog for ``f(0)``'s answer, and the program's wait for ``g`` read
that answer on the one-read path, which never places backlog calls: it then slept on
a replica that had nothing more to send, for ever, saying nothing."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from integration.conftest import Procs

SERVER = """
def f(x):
    return x * 10


def g(a, b):
    return a + b


def h():
    return 7
"""

CLIENT = """
from polybus import use, wait

f = use("f")
g = use("g")
h = use("h")


def main(n, order, sync):
    ps = [f(i) for i in range(n)]
    if sync:  # a sync call waits alone too, answers of f read meanwhile
        assert h() == 7
    q = g(ps[int(order[0])], ps[int(order[1])])
    return wait(q)
"""

TOML = """
[modules.s]
source = "s.py"
transport = "{transport}"

[modules.c]
source = "c.py"
entrypoint = "main"
use.f = {{ callstyle = "async-demand(1)" }}
use.g = {{ callstyle = "async" }}
use.h = {{ callstyle = "sync" }}

[bind]
"c.f" = "s.f"
"c.g" = "s.g"
"c.h" = "s.h"
"""


@pytest.mark.parametrize("transport", ["tcp", "shm"])
@pytest.mark.parametrize(("n", "order", "sync"), [(2, "01", False), (2, "10", False),
                                                  (4, "23", False), (2, "01", True)])
def test_a_consumer_of_backlogged_producers_is_answered(
        procs: Procs, tmp_path: Path, transport: str, n: int, order: str, sync: bool) -> None:
    (tmp_path / "s.py").write_text(textwrap.dedent(SERVER))
    (tmp_path / "c.py").write_text(textwrap.dedent(CLIENT))
    app = tmp_path / "app.toml"
    app.write_text(TOML.format(transport=transport))
    p = procs.start("run", app, "--quiet", "--no-worker-output",
                    "--set", f"modules.c.args=[{n}, \"{order}\", {str(sync).lower()}]")
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the program waited for ever for a call placed behind its backlog")
    assert p.returncode == 0, err
    want = 10 * (int(order[0]) + int(order[1]))
    assert out.strip() == str(want), (out, err)
