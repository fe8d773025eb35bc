"""A priority's slice bounds of literals alone that fail every call (``x[1/0:]``, a step of
0: ``x[::0]``) are refused when the configuration loads, at its file and line, as any
other part of literals alone that fails every call is (test_config_expr.py). They
passed, and each call then failed unsent. A bound of another type (``x[1.5:]``,
``x[:'a']``) is left to the call: a pandas Series takes labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polybus.config import compile_priority, validate
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app

PARAMS = ["query", "n"]


@pytest.mark.parametrize(("source", "part", "why"), [
    ("len(query[1/0:])", "1 / 0", "ZeroDivisionError: division by zero"),
    ("len(query[:n // (2 - 2)])", None, None),  # (reads n: left to the call)
    ("len(query[n:1/0])", "1 / 0", "ZeroDivisionError"),
    ("len(query[::0])", "the slice step 0", "ValueError: slice step cannot be zero"),
    ("len(query[1:2, ::0])", "the slice step 0", "ValueError: slice step cannot be zero"),
    ("len(query[n:n:1-1])", "the slice step 1 - 1", "ValueError: slice step cannot be zero"),
    ("len(query[::0.0])", "the slice step 0.0", "ValueError: slice step cannot be zero"),
])
def test_a_slice_bound_that_fails_every_call_is_refused(
        source: str, part: str | None, why: str | None) -> None:
    if why is None:
        compile_priority(source, PARAMS)
        return
    with pytest.raises(ConfigError) as info:
        compile_priority(source, PARAMS)
    said = str(info.value)
    assert said.startswith(f"priority {source!r}: line 1, column "), said
    assert f"{part} fails on every call ({why}" in said, said


@pytest.mark.parametrize("source", [
    "len(query[1:])", "len(query[:-1])", "len(query[::2])", "len(query[True:])",
    "len(query[None:None:None])", "len(query[n:])", "len(query[:n * 2])",
    "len(query[1:2, ::-1])", "len(query[2**3:])",
])
def test_slice_bounds_a_sequence_takes_are_taken(source: str) -> None:
    expr = compile_priority(source, PARAMS)
    assert expr({"query": np.zeros((12, 12)), "n": 3}) >= 0


@pytest.mark.parametrize("source", ["len(query[1.5:])", "len(query[:'a'])", "len(query['a':'c'])"])
def test_a_bound_of_another_type_is_left_to_the_call(source: str) -> None:
    """A label slice is what a pandas Series takes: it is not refused as the
    configuration loads, and on a list it fails the call, as any priority a call's
    arguments do not fit."""
    expr = compile_priority(source, PARAMS)
    with pytest.raises(TypeError, match="slice indices must be integers"):
        expr({"query": [1, 2, 3], "n": 3})


def test_it_is_said_at_the_file_and_line_that_wrote_it(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server_keys='define.f = { priority = "len(x[1/0:])" }')
    line = app.read_text().splitlines().index(
        'define.f = { priority = "len(x[1/0:])" }') + 1
    config, errors = validate(app)
    assert config is None
    [err] = errors
    assert (err.file, err.line, err.key) == (str(app), line, "modules.server.define.f.priority")
    assert "1 / 0 fails on every call (ZeroDivisionError" in str(err)
    assert str(err).startswith(f"{app}:{line}: modules.server.define.f.priority: "), err
    config, errors = validate(app, ['modules.server.define.f.priority="len(x[::0])"'])
    assert [str(e).split(": priority")[0] for e in errors] == [
        "--set: modules.server.define.f.priority"]
    assert "the slice step 0 fails on every call (ValueError: slice step cannot be zero" in str(errors[0])
