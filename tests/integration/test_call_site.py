"""A remote error raised out of the client names where in the user's client module the
call was made; a call with arguments that do not fit names the function's signature."""

from __future__ import annotations

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
        return a + f(1, 2, 3)
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
    assert "return a + f(1, 2, 3)" in p.stderr
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
