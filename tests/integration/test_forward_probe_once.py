"""A forwarding call's list, tuple and dict arguments are probed for promises once.

On a binding that forwards, each argument that is a list, tuple or dict is looked into
(``holds_promise``, a msgspec encode of it) to find the promises to forward
(client/fwdargs.py). The answer was not kept: the call path probed it again to send it
(``wire``, ``carried``), and a call that forwards went through the look twice (the
async path's, then the general one's). Now the first answer is passed on: each
container is probed once a call, whatever it holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polybus import wait
from polybus.client import fwdargs, fwdprio, wireargs

from . import comm_harness
from .comm_harness import cluster

PAIR = '''

def pair(a, b=None):
    # its arguments as they arrived, each array summed
    s = lambda x: float(x.sum()) if isinstance(x, np.ndarray) else x
    walk = lambda x: ({k: s(v) for k, v in x.items()} if isinstance(x, dict)
                      else [s(v) for v in x] if isinstance(x, (list, tuple)) else s(x))
    return [walk(a), walk(b)]
'''

TOML = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.pair = { callstyle = "async" }
use.gated_double = { callstyle = "async" }

[bind]
"client.pair" = "server.pair"
"client.gated_double" = "server.gated_double"
"""


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[int]]:
    """How many times each object (by id) was probed for a promise."""
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + PAIR)
    seen: Counter[int] = Counter()
    real = wireargs.holds_promise

    def counted(x: Any) -> bool:
        seen[id(x)] += 1
        return real(x)

    for module in (wireargs, fwdargs, fwdprio):
        monkeypatch.setattr(module, "holds_promise", counted)
    yield seen


def test_a_list_of_numbers_is_probed_once(tmp_path: Path, probes: Counter[int]) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        assert s.dispatchers["pair"].forwarder is not None  # (the binding forwards)
        xs = [float(i) for i in range(10)]
        got = wait(s.call("pair", (xs,), {"b": 1}))
        assert got == [xs, 1] and probes[id(xs)] == 1, probes


@pytest.mark.parametrize("shape", ["list", "tuple", "dict", "kwarg"])
def test_a_container_holding_a_promise_is_probed_once(
        tmp_path: Path, probes: Counter[int], shape: str) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        s = c.session()
        go = tmp_path / "go"
        p = s.call("gated_double", (np.ones(4), str(go)), {})
        box: Any = {"list": [p, 1.0], "tuple": (p, 1.0), "dict": {"p": p, "n": 1.0},
                    "kwarg": [1.0, p]}[shape]
        plain = [2.0, 3.0]
        args, kwargs = ((box, plain), {}) if shape != "kwarg" else ((plain,), {"b": box})
        q = s.call("pair", args, kwargs)
        assert not p._rec.done  # type: ignore[attr-defined]
        go.touch()
        got = wait(q)
        assert s.forwarder.forwarded == 1  # type: ignore[attr-defined]
        assert probes[id(box)] == 1 and probes[id(plain)] == 1, (shape, probes)
        want = {"list": [8.0, 1.0], "tuple": [8.0, 1.0], "dict": {"p": 8.0, "n": 1.0},
                "kwarg": [1.0, 8.0]}[shape]
        assert got == ([want, plain] if shape != "kwarg" else [plain, want]), got


def test_a_priority_reading_the_container_probes_it_no_more(
        tmp_path: Path, probes: Counter[int]) -> None:
    # (the priority's look for promises it would wait for takes the answer too)
    text = TOML.replace('replication = 2', 'replication = 2\ndefine.pair = { priority = '
                        '"len(a)" }\ndefine.gated_double = {}\ndefine.inner = {}')
    with cluster(tmp_path, text, replicas=2) as c:
        s = c.session()
        go = tmp_path / "go"
        p = s.call("gated_double", (np.ones(4), str(go)), {})
        box, plain = [p, 1.0], [2.0]
        q = s.call("pair", (box, plain), {})
        go.touch()
        assert wait(q) == [[8.0, 1.0], [2.0]]
        assert s.forwarder.forwarded == 1  # type: ignore[attr-defined]
        assert probes[id(box)] == 1 and probes[id(plain)] == 1, probes
