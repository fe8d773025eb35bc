"""A value TOML reads as infinity, said back to the user: in a message, as it was written
(``1e309`` inside an inline table, or given to ``--set``, was quoted ``inf``, as it
already was not on a key's own line: test_config_ranges.py); in a hint that writes the
value for the user to copy, in a form that reads back as the same value (``args =
[inf]`` in TOML, ``[float("inf")]`` from Python; ``inf`` was left without the hint, and
from Python written ``[1, inf]``, which is no Python)."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from polybus.config import validate
from polybus.config.origin import PYTHON
from polybus.testing.apps import write_one_call_app

U = "modules.client.use.f"
D = "modules.server.define.f"


def _app(tmp_path: Path, server: str = "", client: str = "") -> Path:
    app = write_one_call_app(tmp_path, server_keys=server)
    if client:
        app.write_text(app.read_text().replace('entrypoint = "main"\n',
                                               f'entrypoint = "main"\n{client}\n'))
    return app


def _said(app: Path, sets: object = (), origin: object = None) -> list[tuple[str | None, str]]:
    _, errors = validate(app, sets, origin) if origin else validate(app, sets)  # type: ignore[arg-type]
    return [(e.key, e.bare_message.split(" (")[0]) for e in errors]


@pytest.mark.parametrize(("server", "client", "key", "said"), [
    ("", 'use.f = { callstyle = "async", aggregate = 4, linger = 1e309 }',
     f"{U}.linger", "a duration must be finite, got 1e309"),
    ("define.f = { timeout = -1e309, pool = 2 }", "",
     f"{D}.timeout", "a duration must not be negative, got -1e309"),
    ("", 'use.f = { callstyle = "async", loadratio = [1, 1.8e308] }',
     f"{U}.loadratio", "a load ratio's shares are finite numbers, got [1, 1.8e308]"),
    ("", 'use = { f = { timeout = 1e999 } }',
     f"{U}.timeout", "a duration must be finite, got 1e999"),
    ("", 'use.f = { timeout = inf }', f"{U}.timeout", "a duration must be finite, got inf"),
])
def test_inside_an_inline_table_it_is_quoted_as_written(
        tmp_path: Path, server: str, client: str, key: str, said: str) -> None:
    assert _said(_app(tmp_path, server, client)) == [(key, said)]


@pytest.mark.parametrize(("sets", "key", "said"), [
    ([f"{U}.linger=1e309"], f"{U}.linger", "a duration must be finite, got 1e309"),
    ([f"{U}={{ linger = 1e309 }}"], f"{U}.linger", "a duration must be finite, got 1e309"),
    ([f"{U}.loadratio=[1, -1e400]"], f"{U}.loadratio",
     "a load ratio's shares are finite numbers, got [1, -1e400]"),
    ([f"{U}.linger=1e308", f"{U}.linger=1e309"], f"{U}.linger",  # (the last, taken)
     "a duration must be finite, got 1e309"),
    ([f"{U}.linger=inf"], f"{U}.linger", "a duration must be finite, got inf"),
])
def test_given_to_set_it_is_quoted_as_written(
        tmp_path: Path, sets: list[str], key: str, said: str) -> None:
    assert _said(_app(tmp_path), sets) == [(key, said)]


def _hint(app: Path, sets: object, origin: object = None) -> str:
    _, errors = validate(app, sets, origin) if origin else validate(app, sets)  # type: ignore[arg-type]
    [err] = errors
    assert err.hint is not None, err
    return err.hint


def test_a_hint_writes_an_infinity_in_toml_that_reads_back(tmp_path: Path) -> None:
    app = _app(tmp_path)
    hint = _hint(app, ["modules.client.args=inf"])
    assert hint.endswith("even of one: --set 'modules.client.args=[inf]'"), hint
    assert tomllib.loads("v = [inf]")["v"] == [math.inf]
    app.write_text(app.read_text().replace('entrypoint = "main"\n',
                                           'entrypoint = "main"\nargs = -1e309\n'))
    assert _hint(app, ()).endswith("even of one: args = [-inf]")


def test_a_hint_from_python_writes_an_infinity_python_reads_back(tmp_path: Path) -> None:
    app = _app(tmp_path)
    hint = _hint(app, {"modules.client.args": math.inf}, PYTHON)
    written = hint.rpartition("even of one: ")[2]
    assert written == '{"modules.client.args": [float("inf")]}', hint
    assert eval(written) == {"modules.client.args": [math.inf]}
    hint = _hint(app, {"modules.client.args": "[1, -inf]"}, PYTHON)
    written = hint.rpartition("pass the value itself, ")[2]
    assert written == '{"modules.client.args": [1, float("-inf")]}', hint
    assert eval(written) == {"modules.client.args": [1, -math.inf]}


@pytest.mark.parametrize(("sets", "quoted"), [
    ((f"{D}.priority=inf",), "--set 'modules.server.define.f.priority=\"1e309\"'"),
    ((f"{D}.priority=-1e309",), "--set 'modules.server.define.f.priority=\"-1e309\"'"),
    ((f"{D}.priority=7",), "--set 'modules.server.define.f.priority=\"7\"'"),
])
def test_a_bare_infinite_priority_is_told_a_quoted_expression_that_compiles(
        tmp_path: Path, sets: tuple[str, ...], quoted: str) -> None:
    """The hint quoted ``inf`` as the expression "inf", a name no parameter has."""
    app = _app(tmp_path, server="define.f = {}")
    hint = _hint(app, sets)
    assert hint.endswith(quoted), hint
    _, errors = validate(app, [quoted.split(" ", 1)[1].strip("'")])
    assert errors == []
