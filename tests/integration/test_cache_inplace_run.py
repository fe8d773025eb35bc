"""Cached operands changed in place between rounds, on two aggregating bindings, end to end.

Found by a new-user pass: two bindings caching the same arrays (one async, one
async-demand(2)), aggregate on both, 2 replicas over tcp, the arrays changed in place
between rounds. Before the general aggregated path wrote a call's Puts at once (not held
with the call until its window closed), the new bytes could go under the old content's
name and the run hung (6 of 6 runs with ``both.aggregate = 1``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus

SERVER = '''
def rowsum(x, i, scale=1.0):
    return float(x[i].sum() * scale)

def both(x, y, i):
    return float(x[i].sum() + y[i].sum())
'''

CLIENT = '''
import numpy as np
from polybus import use

rowsum = use("rowsum")
both = use("both")

def main(n, m, rounds):
    x = np.arange(n * m, dtype=np.float64).reshape(n, m)
    y = np.ones((n, m))
    out = []
    for r in range(rounds):
        ps = [rowsum(x, i, scale=2.0) if i % 3 == 0 else rowsum(x, i) for i in range(n)]
        qs = [both(x, y, i) for i in range(n)]
        out.append(sum(float(p) for p in ps) + sum(float(q) for q in qs))
        x[r % n] += 7.0
        y *= 1.5
    return out
'''

TOML = '''
[modules.srv]
source = "srv.py"
replication = 2
define.rowsum = { cache = ["x"] }
define.both = { cache = ["x", "y"] }

[modules.cli]
source = "cli.py"
entrypoint = "main"
args = [64, 20000, 4]
use.rowsum = { callstyle = "async", aggregate = 8 }
use.both = { callstyle = "async-demand(2)", aggregate = AGG }

[bind]
"cli.rowsum" = "srv.rowsum"
"cli.both" = "srv.both"
'''


def expected(n: int, m: int, rounds: int) -> list[float]:
    x = np.arange(n * m, dtype=np.float64).reshape(n, m)
    y = np.ones((n, m))
    out = []
    for r in range(rounds):
        ps = [float(x[i].sum() * (2.0 if i % 3 == 0 else 1.0)) for i in range(n)]
        qs = [float(x[i].sum() + y[i].sum()) for i in range(n)]
        out.append(sum(ps) + sum(qs))
        x[r % n] += 7.0
        y *= 1.5
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("agg", [1, 8])
def test_arrays_changed_in_place_under_two_aggregating_cached_bindings(
        tmp_path: Path, agg: int) -> None:
    (tmp_path / "srv.py").write_text(SERVER)
    (tmp_path / "cli.py").write_text(CLIENT)
    (tmp_path / "app.toml").write_text(TOML.replace("AGG", str(agg)))
    out = polybus.run(tmp_path / "app.toml", worker_output=None)
    assert out.result == pytest.approx(expected(64, 20000, 4))
