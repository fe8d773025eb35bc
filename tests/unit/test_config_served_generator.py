"""`check` of a served function that cannot answer a call: a generator function (each
call failed at run with "a generator cannot be sent: pass list(...) of it", while
check said ok) or an ``async def`` (each call failed with "... is an async def
function"). Each is a warning naming the file, line and function, with the fix; the run
goes ahead, as a replica still starts and serves its other functions. A function that
the served module imports from another of the program's is caught the same way; one in
a module running in the client (replication = 0) returns its generator there, and is
not warned of."""

from __future__ import annotations

import textwrap
from pathlib import Path

from polybus.config import validate
from polybus.errors import ConfigError

SERVER = """\
from helpers import walk


def gen(n):
    for i in range(n):
        yield i


async def coro(n):
    return n


def plain(n):
    squares = (i * i for i in range(n))  # (a generator expression is no yield)

    def inner():
        yield 1
    return list(squares) + list(inner())


def stream(body):
    yield body
"""
HELPERS = "import os\n\n\ndef walk(top):\n    yield from os.walk(top)\n"


def _notes(tmp_path: Path, name: str, replication: int = 1, tail: str = "") -> list[ConfigError]:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "client.py").write_text(
        f'from polybus import use\n{name} = use("{name}")\n\n\ndef main():\n'
        f"    return {name}(3)\n")
    path = tmp_path / "app.toml"
    path.write_text(textwrap.dedent(f"""\
        [modules.server]
        source = "server.py"
        replication = {replication}

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.{name}" = "server.{name}"
        """) + tail)
    config, found = validate(str(path))
    assert found == [] and config is not None
    return list(config.notes)


def test_a_served_generator_function_is_warned_of_with_its_line_and_the_fix(
        tmp_path: Path) -> None:
    notes = _notes(tmp_path, "gen")
    assert len(notes) == 1, notes
    note = notes[0]
    assert note.key == 'bind."client.gen"'
    assert note.bare_message == (
        "interface 'gen' of module 'server' is a generator function (server.py:4: def "
        "gen has yield): every call fails, a generator cannot be sent"), note
    assert note.hint is not None and "return a list" in note.hint, note.hint


def test_a_served_async_def_is_warned_of_the_same_way(tmp_path: Path) -> None:
    notes = _notes(tmp_path, "coro")
    assert [n.bare_message for n in notes] == [
        "interface 'coro' of module 'server' is an async def function (server.py:9: "
        "async def coro): every call fails, its coroutine would never run"], notes
    assert notes[0].hint is not None and "make it a def" in notes[0].hint


def test_a_served_generator_reached_through_an_import_is_warned_of(tmp_path: Path) -> None:
    notes = _notes(tmp_path, "walk")
    assert [n.bare_message for n in notes] == [
        "interface 'walk' of module 'server' is a generator function (helpers.py:4: def "
        "walk has yield): every call fails, a generator cannot be sent"], notes


def test_a_plain_function_with_a_generator_inside_is_not_warned_of(tmp_path: Path) -> None:
    assert _notes(tmp_path, "plain") == []


def test_a_generator_of_a_module_run_in_the_client_is_not_warned_of(tmp_path: Path) -> None:
    notes = _notes(tmp_path, "gen", replication=0)
    assert not any("generator" in n.bare_message for n in notes), notes


def test_a_route_to_a_generator_function_is_warned_of(tmp_path: Path) -> None:
    notes = _notes(tmp_path, "plain", tail='[serve.routes]\n"GET /" = "server.stream"\n')
    assert [(n.key, n.bare_message.split(" (")[0]) for n in notes] == [
        ('serve.routes."GET /"', "interface 'stream' of module 'server' is a generator "
         "function")], notes
