"""An entrypoint that returns promises inside a namedtuple or an OrderedDict: the run
waits for them as for a list's or a dict's, and a failed one ends the run (the --json
error document written). They had come back unwaited: `polybus run --json -` crashed in
json with a raw traceback, and a failed call only showed when the result was printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.errors import RemoteException
from polybus.testing.apps import write_app

SERVER = """\
    def square(x):
        return x * x


    def boom(x):
        raise ValueError(f"boom {x}")
"""
CLIENT = """\
    import collections

    from polybus import use

    square = use("square")
    boom = use("boom")
    NT = collections.namedtuple("NT", "a b")


    def pair():
        return NT(square(2), square(3))


    def failing():
        return collections.OrderedDict(a=square(2), b=boom(0))
"""
TOML = """\
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "{entry}"
    use.square = {{ callstyle = "async" }}
    use.boom = {{ callstyle = "async" }}

    [bind]
    "client.square" = "server.square"
    "client.boom" = "server.boom"
"""


def _app(tmp_path: Path, entry: str) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(entry=entry))


@pytest.mark.timeout(120)
def test_a_namedtuple_of_promises_is_waited_for_and_written_as_json(tmp_path: Path) -> None:
    p = cli("run", _app(tmp_path, "pair"), "--json", "-", "--quiet")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"] == [4, 9]
    r = polybus.run(_app(tmp_path, "pair"), worker_output=False)
    assert type(r.result).__name__ == "NT" and r.result == (4, 9)
    assert type(r.result.a) is int


@pytest.mark.timeout(120)
def test_a_failed_call_in_an_ordered_dict_ends_the_run(tmp_path: Path) -> None:
    app = _app(tmp_path, "failing")
    with pytest.raises(RemoteException, match="boom 0"):
        polybus.run(app, worker_output=False)
    out = tmp_path / "out.json"
    p = cli("run", app, "--json", out, "--quiet")
    assert p.returncode != 0
    assert "boom 0" in p.stderr
    error = json.loads(out.read_text())["error"]
    assert error["remote_type"] == "ValueError" and error["call"] == "boom(0)"
