"""``aggregate`` on a pipeline's middle stage: a binding whose calls take a promise of an
earlier stage's call and whose own promises are passed on to a later stage.

Such a call goes the general way (a promise among its arguments) and is held to be
written with the next ones (policies/aggregate.py). Passing its promise on asked its
replica to forward the value, and that request wrote what was held first, so each call
of the stage went alone: 8 calls through load -> smooth -> stats, three modules,
``aggregate = 4`` on smooth, made 0 batches (smooth(load(i)) alone made 2). The request
now goes right after the held calls, whenever they are written (client/fwdbatch.py's
`ask`), and the stage batches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
def load(i):
    return [float(i)] * 4

def smooth(xs):
    return [x / 2 for x in xs]

def stats(xs):
    return sum(xs)
"""

CLIENT = """
from polybus import use, wait

load = use("load")
smooth = use("smooth")
stats = use("stats")

def main(n, chain):
    ps = []
    for i in range(n):
        p = smooth(load(i))
        ps.append(stats(p) if chain else p)
    return wait(ps)
"""

TOML = """
[modules.loader]
source = "server.py"
[modules.smoother]
source = "server.py"
[modules.stater]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
args = [{n}, {chain}]
use.load = {{ callstyle = "async" }}
use.smooth = {{ callstyle = "{style}", aggregate = 4, linger = "30s" }}
use.stats = {{ callstyle = "async" }}

[bind]
"client.load" = "loader.load"
"client.smooth" = "smoother.smooth"
"client.stats" = "stater.stats"
"""


def _run(tmp: Path, n: int, chain: bool, style: str = "async") -> dict[str, Any]:
    write_app(tmp, server=SERVER, client=CLIENT,
              toml=TOML.format(n=n, chain=str(chain).lower(), style=style))
    p = cli("run", "app.toml", "--json", "out.json", cwd=tmp)
    assert p.returncode == 0, p.stderr
    data: dict[str, Any] = json.loads((tmp / "out.json").read_text())
    return data


@pytest.mark.parametrize("style", ["async", "async-demand(2)"])
def test_a_middle_stage_batches_and_forwards_its_values(tmp_path: Path, style: str) -> None:
    data = _run(tmp_path, 8, chain=True, style=style)
    assert data["result"] == [4.0 * i / 2 for i in range(8)]
    smooth = data["interfaces"]["client.smooth"]
    assert smooth["calls"] == 8
    # Each value went on replica to replica, or, answered before its consumer was made
    # (a busy machine), from the client.
    assert smooth["forwarded"] > 0 and smooth["forwarded"] + smooth["through_client"] == 8
    # Held calls are written when the program waits, or when it leaves them (the pump):
    # how many go together may vary, but some do. (Before: 0 batches, 0 calls.)
    assert smooth["batches"] >= 1 and 2 * smooth["batches"] <= smooth["batched_calls"] <= 8


def test_the_same_stage_whose_promises_stay_at_the_client_batches_too(
        tmp_path: Path) -> None:
    data = _run(tmp_path, 8, chain=False)
    assert data["result"] == [[i / 2] * 4 for i in range(8)]
    smooth = data["interfaces"]["client.smooth"]
    assert smooth["forwarded"] == 0
    assert smooth["batches"] >= 1 and 2 * smooth["batches"] <= smooth["batched_calls"] <= 8
