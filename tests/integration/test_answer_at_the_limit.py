"""Calls made, and promises waited for, a few frames short of the recursion limit: the
program meets its own RecursionError where it called, and every call that was made is
answered, so the run ends. An answer filed that deep used to be cut short halfway by
the RecursionError (taken from its replica's calls, its value never set), and the run's
end waited for it until killed (client/headroom.py). Each run is a child process with a
time limit: a run that hangs fails its test instead of the suite."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from polybus.testing.apps import write_app
from polybus.testing.engines import launch

SERVER = """
    def nested(depth):
        return [nested(depth - 1)] if depth else []
"""

CLIENT = """
    import sys

    from polybus import use, wait

    nested = use("nested")


    def dive(n, f):
        return f() if n == 0 else dive(n - 1, f)


    def main(deep_wait):
        limit = sys.getrecursionlimit()
        cut, made, here, frame = 0, [], 0, sys._getframe()
        while frame is not None:
            here, frame = here + 1, frame.f_back
        early = [nested(3) for _ in range(90)] if deep_wait else []  # (waited for deep)
        for margin in range(1, 90):
            if deep_wait:
                f = lambda p=early[margin]: wait(p)
            else:
                f = lambda: wait(nested(5))
            try:
                made.append(dive(limit - here - margin, f))
            except RecursionError:
                cut += 1
        right = all(m == nested(5) for m in made) if not deep_wait else \\
            all(m == nested(3) for m in made)
        return {"cut": cut, "made": len(made), "right": right,
                "limit_kept": sys.getrecursionlimit() == limit,
                "after": wait(nested(1))}
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [{deep_wait}]
    use.nested = {{ callstyle = "{style}" }}

    [bind]
    "client.nested" = "server.nested"
"""


@pytest.mark.timeout(150)
@pytest.mark.parametrize(("style", "deep_wait"), [
    ("sync", "false"), ("async", "false"), ("async-demand(2)", "false"),
    ("async", "true"), ("async-demand(2)", "true")])
def test_a_run_with_calls_at_the_recursion_limit_ends(tmp_path: Path, style: str,
                                                      deep_wait: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(style=style, deep_wait=deep_wait))
    out_json = tmp_path / "out.json"
    rc, out = launch([sys.executable, "-m", "polybus", "run", str(app), "--json",
                      str(out_json)], tmp_path)
    assert rc == 0, out
    result = json.loads(out_json.read_text())["result"]
    assert result["cut"] > 0, result  # (the program's own limit still holds)
    assert result["made"] > 0 and result["right"], result
    assert result["limit_kept"] and result["after"] == [[]], result
