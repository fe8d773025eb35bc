"""A remote error raised out of the client names where in the user's client module the
call was made; a call with arguments that do not fit names the function's signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.errors import RemoteException
from polybus.testing.apps import write_app

SERVER = """\
def f(x, y=2, *, scale=1):
    return (x + y) * scale


def g(x):
    return len(x)
"""
CLIENT = """\
from polybus import use
f = use("f")
g = use("g")


def main(bad):
    a = f(1)
    if bad == "args":
        return a + f(*(1, 2, 3))  # (unpacked: check refuses f(1, 2, 3), callargs.py)
    return a + g(5)
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
args = ["args"]
use.f = {{ callstyle = "{style}" }}
use.g = {{ callstyle = "{style}" }}

[bind]
"client.f" = "server.f"
"client.g" = "server.g"
"""


@pytest.mark.parametrize("style", ["sync", "async"])
def test_wrong_arguments_name_the_call_site_and_the_signature(tmp_path: Path,
                                                              style: str) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(style=style))
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2
    assert "f() takes from 1 to 2 positional arguments but 3 were given" in p.stderr
    assert 'client.py", line 9, in main' in p.stderr
    assert "return a + f(*(1, 2, 3))" in p.stderr
    assert "f(x, y=2, *, scale=1)" in p.stderr and 'server.py", line 1' in p.stderr
    assert p.stderr.count("f(x, y=2, *, scale=1)") == 1, p.stderr  # (not the replica's too)
    assert "polybus/" not in p.stderr  # the remote traceback was polybus's frame alone


@pytest.mark.parametrize("style", ["sync", "async"])
def test_a_remote_exception_names_the_call_site_and_keeps_its_traceback(
        tmp_path: Path, style: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(style=style))
    with pytest.raises(RemoteException) as e:
        polybus.run(app, {"modules.client.args": ["other"]})
    assert e.value.remote_type == "TypeError"
    assert e.value.call_site is not None and e.value.call_site.endswith("client.py:10")
    text = str(e.value)
    assert 'client.py", line 10, in main' in text and "return a + g(5)" in text
    assert "return len(x)" in text          # the error is inside g: its traceback stays
    assert "signature" not in text and "g(x)" not in text


PICKY = """\
def pick(x, tag=""):
    if x == 3:
        raise ValueError(f"no {x}")
    return x
"""
PICKY_CLIENT = """\
from polybus import use, wait
pick = use("pick")


def main(how):
    if how == "returned":
        return pick(3, tag="t")
    ps = [pick(x, "t") for x in range(5)]
    return sum(wait(p) for p in ps)
"""
PICKY_TOML = """\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
args = ["waited"]
use.pick = {use}

[bind]
"client.pick" = "server.pick"
"""
PICKY_USES = {"sync": '{ callstyle = "sync" }', "async": '{ callstyle = "async" }',
              "aggregated": '{ callstyle = "async", aggregate = 4, linger = "1h" }'}


@pytest.mark.parametrize("use", list(PICKY_USES))
def test_a_remote_error_says_which_call_by_its_arguments(tmp_path: Path, use: str) -> None:
    """Five calls to pick, one fails: the error said the line and the replica, not which
    of the five it was (an async call's line is where its answer was used)."""
    app = write_app(tmp_path, server=PICKY, client=PICKY_CLIENT,
                    toml=PICKY_TOML.format(use=PICKY_USES[use]))
    with pytest.raises(RemoteException) as e:
        polybus.run(app)
    assert e.value.remote_message == "no 3"
    said = "pick(3, 't')"  # (the aggregated one from its batch's row)
    assert e.value.call == said, e.value.call
    line, what = (8, f"the call {said} at") if use == "sync" else (
        9, f"the call {said} whose answer was used at")
    assert f'  {what} File "{tmp_path / "client.py"}", line {line}, in ' in str(e.value), \
        str(e.value)


def test_a_returned_promise_that_failed_says_which_call(tmp_path: Path) -> None:
    write_app(tmp_path, server=PICKY, client=PICKY_CLIENT,
              toml=PICKY_TOML.format(use=PICKY_USES["async"]))
    p = cli("run", "app.toml", "--set", 'modules.client.args=["returned"]', "--json",
            tmp_path / "out.json", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "the call pick(3, tag='t') whose promise main() returned, waited for when it " \
           "returned" in p.stderr, p.stderr
    error = json.loads((tmp_path / "out.json").read_text())["error"]
    assert error["call"] == "pick(3, tag='t')", error
