"""A priority's slice bounds of literals alone that fail every call (``x[1/0:]``, a step of
0: ``x[::0]``) are refused when the configuration loads, at its file and line, as any
other part of literals alone that fails every call is (those cases are among
test_config_expr.py's). They passed, and each call then failed unsent. A bound of another type (``x[1.5:]``,
``x[:'a']``) is left to the call: a pandas Series takes labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polybus.config import compile_priority, validate
from polybus.testing.apps import write_one_call_app

PARAMS = ["query", "n"]


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
