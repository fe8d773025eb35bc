"""What `polybus run` makes of a client program that does something odd: a generator
function as its entrypoint, a BaseException of its own, a result whose repr raises.
Each was found by a tester: the first ran nothing and said nothing (status 0, the
result `<generator object main ...>`), the other two came out as raw tracebacks
through polybus's own frames, the third losing the summary."""

from __future__ import annotations

import json
from pathlib import Path

from polybus.testing.apps import write_app

from .conftest import cli

SERVER = "def f(x):\n    return x\n"
TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.f" = "server.f"
"""
CLIENT = """
    from polybus import use

    f = use("f")


    def gen():
        print("the generator's body ran")
        yield f(1)


    class Mine(BaseException):
        pass


    class BadRepr:
        def __repr__(self):
            raise RuntimeError("repr boom")


    def base():
        f(1)
        raise Mine("a BaseException of the program's own")


    def badrepr():
        f(1)
        return [BadRepr()]
"""


def _app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)


def test_a_generator_entrypoint_is_refused_by_check_and_run(tmp_path: Path) -> None:
    _app(tmp_path)
    note = "'gen' is a generator function (it has yield)"
    p = cli("check", "app.toml", "--set", "modules.client.entrypoint=gen", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"module 'client' (client.py): {note}" in p.stderr
    p = cli("run", "app.toml", "--set", "modules.client.entrypoint=gen", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"modules.client.entrypoint: {note}" in p.stderr
    assert "return a list of the values instead" in p.stderr
    assert "generator object" not in p.stdout


def test_a_base_exception_of_the_client_is_said_as_the_client_s(tmp_path: Path) -> None:
    _app(tmp_path)
    p = cli("run", "app.toml", "--quiet", "--set", "modules.client.entrypoint=base",
            cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("polybus run: the client raised Mine\n"), p.stderr
    assert "client.Mine: a BaseException of the program's own" in p.stderr
    assert "runner.py" not in p.stderr and "cmd_run.py" not in p.stderr


def test_a_result_whose_repr_raises_is_said_and_the_summary_kept(tmp_path: Path) -> None:
    _app(tmp_path)
    said = ("polybus run: the result (list) could not be shown: printing it raised "
            "RuntimeError: repr boom")
    p = cli("run", "app.toml", "--set", "modules.client.entrypoint=badrepr",
            "--json", "out.json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert p.stdout == ""
    assert said in p.stderr.splitlines()
    assert "Traceback" not in p.stderr
    assert "1 call, sent" in p.stderr  # (the summary's caption)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["result"] == ["<BadRepr: repr raised RuntimeError: repr boom>"]
    assert doc["calls"] == 1
    # --json -: nothing is printed but the JSON, which says what the repr raised
    p = cli("run", "app.toml", "--quiet", "--set", "modules.client.entrypoint=badrepr",
            "--json", "-", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["result"] == ["<BadRepr: repr raised RuntimeError: repr boom>"]
