"""A call that failed and whose promise the program passed to another call is named as
passed, not as made, at that line: a new user's render(...) that raised was said as
"the call render(...) at File driver.py, line 16: scores = [score(t, threshold) ...]",
the line of the score calls, as if render had been called there (callsite.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import RemoteException
from polybus.testing.apps import write_app

SERVER = """\
def render(i):
    raise ValueError(f"no tile {i}")


def score(tile):
    return tile
"""
CLIENT = """\
from polybus import use, wait
render = use("render")
rate = use("rate")


def main():
    tile = render(3)
    try:
        wait(tile)
    except Exception:
        pass
    return rate(tile)
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.render = { callstyle = "async" }
use.rate = { callstyle = "async" }

[bind]
"client.render" = "server.render"
"client.rate" = "server.score"
"""


@pytest.mark.timeout(60)
def test_a_failed_promise_passed_on_is_named_as_passed_to_the_call(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    with pytest.raises(RemoteException) as e:
        polybus.run(app)
    assert e.value.interface == "render"
    at = str(e.value).split("\n")[1]
    assert at.startswith("  the call render(3) whose promise was passed to rate(...) at "
                         'File "'), at
    assert at.endswith('client.py", line 12, in main:'), at
