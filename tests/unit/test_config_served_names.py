"""`check` of a served name that is no ``def`` of the server module: a function it
imports from another module of the program is served and checked as a ``def`` is; a
partial or a callable instance is served, its calls left to the replica (a note says
so), and what needs its parameters from the source is refused with how to wrap it in a
``def``; a module or a literal is refused, named with its type and the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from polybus.config import validate
from polybus.errors import ConfigError
from polybus.worker.module import interfaces, load_module

SERVER = """\
import functools
import numpy as np
from helpers import render


def _scale(x, k):
    return x * k


double = functools.partial(_scale, k=2)


class Counter:
    def __call__(self, x):
        return x + 1


count = Counter()
SIZE = 3
"""
HELPERS = "def render(tile, gain=1.0):\n    return [t * gain for t in tile]\n"


def _validate(tmp_path: Path, name: str, call: str, server_keys: str = "",
              tail: str = "") -> tuple[list[ConfigError], list[ConfigError], Path]:
    """The mistakes and the notes of a configuration binding ``client.<name>`` to
    ``server.<name>``, the client calling it as ``call``."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "client.py").write_text(
        f'from polybus import use\n{name} = use("{name}")\n\n\ndef main():\n'
        f"    return {call}\n")
    path = tmp_path / "app.toml"
    path.write_text(textwrap.dedent(f"""\
        [modules.server]
        source = "server.py"
        replication = 1
        {server_keys}

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.{name}" = "server.{name}"
        {tail}"""))
    config, found = validate(str(path))
    assert (config is None) == bool(found)
    notes = list(config.notes) if config is not None else []
    return found, notes, path


def test_an_imported_function_is_served_without_a_define_table(tmp_path: Path) -> None:
    found, notes, path = _validate(tmp_path, "render", "render([1], gain=2.0)")
    assert found == [] and notes == []
    config, _ = validate(str(path))
    assert config is not None and list(config.modules["server"].define) == ["render"]
    # (only what [bind] names: a private name, or one bound nowhere, is no interface)
    for name in ("_scale", "nowhere"):
        found, _, _ = _validate(tmp_path, name, f"{name}(4)")
        assert [e.bare_message for e in found] == [
            f"module 'server' has no interface {name!r}"], name


def test_a_call_that_does_not_fit_an_imported_function_is_refused(tmp_path: Path) -> None:
    found, _, _ = _validate(tmp_path, "render", "render([1], gian=2.0)")
    [e] = found
    assert (e.file, e.line) == (str(tmp_path / "client.py"), 6)
    assert e.bare_message == (
        f"the call render([1], gian=2.0) does not fit render(tile, gain=1.0), defined at "
        f"{tmp_path / 'helpers.py'}:1: got an unexpected keyword argument 'gian'")


def test_a_priority_over_an_imported_function_s_parameter_is_read(tmp_path: Path) -> None:
    found, _, _ = _validate(tmp_path, "render", "render([1])",
                            'define.render = { priority = "gain" }')
    assert found == []
    found, _, _ = _validate(tmp_path, "render", "render([1])",
                            'define.render = { priority = "gian" }')
    assert [e.key for e in found] == ["modules.server.define.render.priority"]


@pytest.mark.parametrize("name", ["double", "count"])
def test_a_partial_or_a_callable_instance_is_served_with_a_note(tmp_path: Path,
                                                                name: str) -> None:
    found, notes, _ = _validate(tmp_path, name, f"{name}(4)")
    assert found == []
    [note] = notes
    line = {"double": 10, "count": 18}[name]
    assert note.bare_message.startswith(
        f"the calls of {name} ({tmp_path / 'client.py'}:6) are not checked against its "
        f"parameters before the run: server.{name} is bound by ")
    assert f"at {tmp_path / 'server.py'}:{line}, not by a def" in note.bare_message, note
    assert note.hint is not None and f"modules.client.use.{name}.check_calls = false" \
        in note.hint
    # (told to leave the calls alone: no note)
    found, notes, _ = _validate(tmp_path, name, f"{name}(4)",
                                tail=f"\n[modules.client.use.{name}]\ncheck_calls = false\n")
    assert found == [] and notes == []


@pytest.mark.parametrize(("keys", "key", "said"), [
    ('define.double = { priority = "x" }', "priority",
     "the parameters priority 'x' reads of interface 'double' cannot be read from the "
     "source: server.py:10 binds it by 'double = functools.partial(_scale, k=2)', not by "
     "a def"),
    ('define.double = { cache = ["x"] }', "cache",
     "the cache parameters of interface 'double' cannot be read from the source: "
     "server.py:10 binds it by"),
])
def test_what_needs_a_partial_s_parameters_is_refused(tmp_path: Path, keys: str, key: str,
                                                      said: str) -> None:
    found, _, _ = _validate(tmp_path, "double", "double(4)", keys)
    [e] = found
    assert e.key == f"modules.server.define.double.{key}"
    assert e.bare_message.startswith(said), e.bare_message
    assert e.hint is not None and e.hint.startswith("serve a def instead: def double(x, ...)")


def test_a_priority_of_literals_only_is_no_parameter_of_a_partial(tmp_path: Path) -> None:
    found, _, _ = _validate(tmp_path, "double", "double(4)",
                            'define.double = { priority = "2" }')
    assert found == []


def test_a_route_to_a_partial_is_refused(tmp_path: Path) -> None:
    found, _, _ = _validate(tmp_path, "render", "render([1])",
                            tail='\n[serve.routes]\n"GET /" = "server.double"\n')
    [e] = found
    assert e.key == 'serve.routes."GET /"'
    assert e.bare_message.startswith("handler 'double' is no def that server.py shows "
                                     "(double = functools.partial(_scale, k=2), line 10)")


@pytest.mark.parametrize(("name", "kind", "line", "text"), [
    ("SIZE", "an int", 19, "SIZE = 3"),
    ("np", "a module", 2, "import numpy as np"),
])
def test_a_literal_or_a_module_is_refused_with_what_it_is(tmp_path: Path, name: str,
                                                          kind: str, line: int,
                                                          text: str) -> None:
    said = (f"interface {name!r} is {kind}, not a function: server.py:{line} binds it "
            f"({text})")
    found, _, _ = _validate(tmp_path, name, f"{name}(4)")  # (no define: by [bind])
    [e] = found
    assert e.key == f'bind."client.{name}"'
    assert e.bare_message == f"module 'server' cannot serve {name!r}: {said}"
    assert e.hint is not None and "define one in server.py" in e.hint
    found, _, _ = _validate(tmp_path, name, f"{name}(4)", f"define.{name} = {{}}")
    [e] = found
    assert e.key == f"modules.server.define.{name}" and e.bare_message == said


def test_a_replica_refuses_what_is_not_callable_once_imported(tmp_path: Path) -> None:
    (tmp_path / "odd.py").write_text("import json\nSIZE = 3\nNONE = None\n")
    module = load_module(tmp_path / "odd.py", "polybus_test_odd_module")
    for name, what in [("SIZE", "an int, not a function"), ("NONE", "None, not a function"),
                       ("json", "the module json, not a function"), ("gone", "missing")]:
        with pytest.raises(ConfigError) as e:
            interfaces(module, [name])
        assert str(e.value).endswith(f"{name!r}, which the configuration names, is {what} "
                                     "once the module is imported"), e.value


def test_a_define_table_that_leaves_out_an_imported_function_says_so(tmp_path: Path) -> None:
    found, _, _ = _validate(tmp_path, "render", "render([1])", "define.double = {}")
    [e] = found
    assert e.bare_message == ("module 'server' does not serve 'render': a module with a "
                              "define table serves only the interfaces it lists (double)")
    assert e.hint == "add define.render = {} to [modules.server]"


def test_a_callable_instance_whose_call_is_async_is_refused_per_call(tmp_path: Path) -> None:
    """An instance whose ``__call__`` is an async def is served as an async def is: each
    call fails saying so (its coroutine never ran and could not be sent back)."""
    (tmp_path / "odd.py").write_text(
        "class Later:\n    async def __call__(self, x):\n        return x\n\n\nlater = Later()\n")
    module = load_module(tmp_path / "odd.py", "polybus_test_async_call_module")
    with pytest.raises(TypeError, match="is an async def function"):
        interfaces(module, ["later"])["later"](1)


def test_the_note_names_each_line_of_the_calls_once(tmp_path: Path) -> None:
    found, notes, _ = _validate(tmp_path, "double", "double(4) + double(5)")
    [note] = notes
    assert found == [] and f"the calls of double ({tmp_path / 'client.py'}:6) are not " \
        in note.bare_message, note
