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


def said_passed_to(app: Path, stage2: str) -> None:
    """The run of ``app`` fails with render(3)'s error, said as passed to ``stage2`` at
    the client's line 12 (where it was passed)."""
    with pytest.raises(RemoteException) as e:
        polybus.run(app)
    assert e.value.interface == "render"
    at = str(e.value).split("\n")[1]
    assert at.startswith(f"  the call render(3) whose promise was passed to {stage2}(...) "
                         'at File "'), at
    assert at.endswith('client.py", line 12, in main:'), at


@pytest.mark.timeout(60)
def test_a_failed_promise_passed_on_is_named_as_passed_to_the_call(tmp_path: Path) -> None:
    said_passed_to(write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML), "rate")


SAME_CLIENT = CLIENT.replace('rate = use("rate")', 'again = use("again")').replace(
    "return rate(tile)", "return again(tile)")

SAME_NAME_TOML = """\
[modules.server]
source = "server.py"
replication = 1

[modules.part2]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.render = { callstyle = "async" }
use.again = { callstyle = "async" }

[bind]
"client.render" = "server.render"
"client.again" = "part2.render"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stage2", ["render", "again"])
def test_a_failed_promise_passed_to_a_call_of_the_same_interface_is_named_as_passed(
        tmp_path: Path, stage2: str) -> None:
    # render(render(x)) and part2's render(part1's render(x)): the call made at the line
    # binds the interface that raised, which was taken for the call that raised
    client = SAME_CLIENT.replace("return again(tile)", f"return {stage2}(tile)")
    said_passed_to(write_app(tmp_path, server=SERVER, client=client, toml=SAME_NAME_TOML),
                   stage2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("replicas", [1, 0])
def test_a_failed_promise_the_program_saw_fail_raises_where_passed_at_any_replication(
        tmp_path: Path, replicas: int) -> None:
    """render(3)'s failure caught, then its promise passed to again(...) (server.render
    too): with replicas the answered failed promise raises at again's call; called in
    the client (replication = 0) again's promise failed instead, and the error came out
    where main's value was waited for, another line."""
    app = write_app(tmp_path, server=SERVER, client=SAME_CLIENT, toml=TOML.replace(
        '"client.rate" = "server.score"', '"client.again" = "server.render"').replace(
        "use.rate", "use.again").replace("replication = 1", f"replication = {replicas}"))
    said_passed_to(app, "again")
