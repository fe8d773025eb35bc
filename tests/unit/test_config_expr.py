"""The priority expression language: what it accepts, what it refuses, what it computes."""

from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from polybus.config import PriorityExpr, compile_priority
from polybus.errors import ConfigError

PARAMS = ["query", "entry", "n", "obj"]


def value(source: str, **bound: Any) -> float:
    return compile_priority(source, PARAMS)(bound)


@pytest.mark.parametrize(("source", "bound", "expected"), [
    ("len(query)", {"query": "GATTACA"}, 7.0),
    ("n", {"n": 3}, 3.0),
    ("-n", {"n": 3}, -3.0),
    ("+n", {"n": 3}, 3.0),
    ("n + 2 * 3 - 1", {"n": 1}, 6.0),
    ("n / 4", {"n": 1}, 0.25),
    ("n // 4", {"n": 9}, 2.0),
    ("n % 4", {"n": 9}, 1.0),
    ("n ** 2", {"n": 9}, 81.0),
    ("2 ** -1", {}, 0.5),
    ("1.5 * n", {"n": 2}, 3.0),
    ("n > 2", {"n": 3}, 1.0),
    ("n > 2", {"n": 1}, 0.0),
    ("1 < n <= 3", {"n": 3}, 1.0),
    ("1 < n <= 3", {"n": 4}, 0.0),
    ("n == 3 and 10 or 20", {"n": 3}, 10.0),
    ("n == 3 and 10 or 20", {"n": 4}, 20.0),
    ("not n", {"n": 0}, 1.0),
    ("n != 3", {"n": 3}, 0.0),
    ("'A' in query", {"query": "ACGT"}, 1.0),
    ("'U' not in query", {"query": "ACGT"}, 1.0),
    ("obj is None", {"obj": None}, 1.0),
    ("obj is not None", {"obj": None}, 0.0),
    ("query == 'x'", {"query": "x"}, 1.0),
    ("True + False", {}, 1.0),
    ("max(len(query), len(entry))", {"query": "ab", "entry": "abc"}, 3.0),
    ("min(n, 10, 4)", {"n": 7}, 4.0),
    ("min(query)", {"query": [5, 2, 9]}, 2.0),
    ("abs(n - 10)", {"n": 3}, 7.0),
    ("obj.size", {"obj": SimpleNamespace(size=42)}, 42.0),
    ("obj.inner.size * 2", {"obj": SimpleNamespace(inner=SimpleNamespace(size=4))}, 8.0),
    ("query[0]", {"query": [7, 8]}, 7.0),
    ("len(query[1:3])", {"query": "abcdef"}, 2.0),
    ("len(query[::2])", {"query": "abcdef"}, 3.0),
    ("obj.shape[0]", {"obj": np.zeros((5, 2))}, 5.0),
    ("obj[1, 0]", {"obj": np.arange(6).reshape(3, 2)}, 2.0),
    ("len(query) * 2 + \n n", {"query": "ab", "n": 1}, 5.0),
])
def test_evaluation(source: str, bound: dict[str, Any], expected: float) -> None:
    assert value(source, **bound) == pytest.approx(expected)
    assert isinstance(value(source, **bound), float)


def test_parameter_named_like_a_builtin_is_the_parameter() -> None:
    expr = compile_priority("len + 1", ["len"])
    assert expr({"len": 4}) == 5.0


def test_names_lists_the_parameters_read() -> None:
    expr = compile_priority("len(query) + n * 2", PARAMS)
    assert expr.names == frozenset({"query", "n"})
    assert expr.source == "len(query) + n * 2"
    assert isinstance(expr, PriorityExpr)
    assert repr(expr) == "PriorityExpr('len(query) + n * 2')"


def test_surrounding_whitespace_is_ignored() -> None:
    assert compile_priority("\n  n  \n", PARAMS)({"n": 2}) == 2.0


def test_never_evaluates_with_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval/exec/compile used")

    expr = compile_priority("len(query) + n", PARAMS)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(builtins, "compile", forbidden)
    assert expr({"query": "abc", "n": 1}) == 4.0


def refused(source: str, params: list[str] = PARAMS) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        compile_priority(source, params)
    assert info.value.file is None and info.value.key is None
    return info.value


@pytest.mark.parametrize(("source", "where", "construct"), [
    ("eval(query)", "line 1, column 1", "a call to 'eval'"),
    ("n + open('/etc/passwd')", "line 1, column 5", "a call to 'open'"),
    ("query.upper()", "line 1, column 1", "a call to 'query.upper'"),
    ("(lambda: 1)()", "line 1, column 1", "a call to 'lambda: 1'"),
    ("lambda: 1", "line 1, column 1", "a lambda"),
    ("[x for x in query]", "line 1, column 1", "a list comprehension"),
    ("{x for x in query}", "line 1, column 1", "a set comprehension"),
    ("{x: 1 for x in query}", "line 1, column 1", "a dict comprehension"),
    ("sum(x for x in query)", "line 1, column 1", "a call to 'sum'"),
    ("max(x for x in query)", "line 1, column 4", "a generator expression"),
    ("(x := 1)", "line 1, column 2", "an assignment expression (:=)"),
    ("n + (x := 1)", "line 1, column 6", "an assignment expression (:=)"),
    ("f'{query}'", "line 1, column 1", "an f-string"),
    ("1 if n else 2", "line 1, column 1", "a conditional expression (x if c else y)"),
    ("[1, 2]", "line 1, column 1", "a list display"),
    ("(1, 2)", "line 1, column 1", "a tuple display"),
    ("{1}", "line 1, column 1", "a set display"),
    ("{'a': 1}", "line 1, column 1", "a dict display"),
    ("max(*query)", "line 1, column 5", "a starred expression (*x)"),
    ("n & 1", "line 1, column 1", "the operator &"),
    ("n | 1", "line 1, column 1", "the operator |"),
    ("n ^ 1", "line 1, column 1", "the operator ^"),
    ("n << 1", "line 1, column 1", "the operator <<"),
    ("n >> 1", "line 1, column 1", "the operator >>"),
    ("obj @ obj", "line 1, column 1", "the operator @"),
    ("~n", "line 1, column 1", "the operator ~"),
    ("obj.__class__", "line 1, column 5", "the attribute '__class__' (starts with '_')"),
    ("obj._private", "line 1, column 5", "the attribute '_private' (starts with '_')"),
    ("len(obj.__dict__)", "line 1, column 9", "the attribute '__dict__' (starts with '_')"),
    ("b'x'", "line 1, column 1", "the literal b'x'"),
    ("1j", "line 1, column 1", "the literal 1j"),
    ("...", "line 1, column 1", "the literal Ellipsis"),
    ("max(n, key=abs)", "line 1, column 1", "a keyword argument in the call to 'max'"),
    ("len", "line 1, column 1", "'len' other than in a call"),
    ("await n", "line 1, column 1", "await"),
    ("n +\n  (yield)", "line 2, column 4", "yield"),
])
def test_refused_constructs(source: str, where: str, construct: str) -> None:
    err = refused(source)
    assert err.bare_message == (f"priority {source!r}: {where}: {construct} is not allowed in a "
                                "priority expression")


def test_refused_call_hint_names_the_allowed_calls() -> None:
    assert refused("sorted(query)").hint == "only len, min, max, abs may be called"


def test_unknown_name_gets_the_nearest_parameter() -> None:
    err = refused("len(qeury)")
    assert err.bare_message == ("priority 'len(qeury)': line 1, column 5: name 'qeury' is not "
                                "a parameter of the interface")
    assert err.hint == "did you mean 'query'?"


def test_unknown_name_without_a_close_one_lists_the_parameters() -> None:
    assert refused("zzz", ["a", "b"]).hint == "parameters: a, b"
    assert refused("zzz", []).hint == "no parameters"


@pytest.mark.parametrize("builtin", ["__import__('os')", "getattr(obj, 'x')", "globals()",
                                     "exec('1')", "type(obj)"])
def test_dangerous_calls(builtin: str) -> None:
    assert "a call to" in refused(builtin).bare_message


@pytest.mark.parametrize(("source", "message"), [
    ("len(query, entry)", "len() takes 1 argument(s), got 2"),
    ("abs()", "abs() takes 1 argument(s), got 0"),
    ("max()", "max() takes at least 1 argument(s), got 0"),
])
def test_call_arity(source: str, message: str) -> None:
    assert refused(source).bare_message == f"priority {source!r}: line 1, column 1: {message}"


@pytest.mark.parametrize(("source", "column"), [("1 +", 4), ("len(query", 1), ("n n", 1)])
def test_syntax_errors(source: str, column: int) -> None:
    message = refused(source).bare_message
    assert message.startswith(f"priority {source!r}: line 1, column {column}: syntax error: ")


def test_statements_are_syntax_errors() -> None:
    assert "syntax error" in refused("import os").bare_message
    assert "syntax error" in refused("n = 1").bare_message


def test_empty() -> None:
    err = refused("   ")
    assert err.bare_message == "empty priority expression"


def test_not_a_string() -> None:
    with pytest.raises(ConfigError, match="expected a priority expression string"):
        compile_priority(5, PARAMS)  # type: ignore[arg-type]


def test_runtime_errors_are_raised_normally() -> None:
    with pytest.raises(ZeroDivisionError):
        value("n / 0", n=1)
    with pytest.raises(KeyError):
        value("n")
    with pytest.raises(TypeError):
        value("query", query="abc")  # not a number


def test_runaway_powers_and_repetitions_are_refused_at_run_time() -> None:
    with pytest.raises(OverflowError):
        value("n ** n ** n", n=99)
    with pytest.raises(OverflowError):
        value("len(query * n)", query="ab", n=10**9)
    with pytest.raises(OverflowError):
        value("len(n * query)", query="ab", n=10**9)
    assert value("len(query * 3)", query="ab") == 6.0
    assert value("(-1) ** 10**9") == 1.0


def test_string_formatting_is_refused_at_run_time() -> None:
    with pytest.raises(TypeError, match="formatting"):
        value("len(query % n)", query="%s", n=1)


def test_every_allowed_node_type_appears_in_a_test() -> None:
    # a guard: the evaluator handles exactly what the checker admits
    source = "abs(-n) + len(query[0:2]) + obj.x[0] + (n > 1 and not n)"
    tree = ast.parse(source, mode="eval")
    kinds = {type(node).__name__ for node in ast.walk(tree)}
    assert {"Call", "UnaryOp", "Subscript", "Slice", "Attribute", "BoolOp", "Compare"} <= kinds
    obj = SimpleNamespace(x=[3])
    assert compile_priority(source, PARAMS)({"n": 2, "query": "abc", "obj": obj}) == 7.0


def test_unbalanced_parentheses_are_not_completed_by_the_wrapper() -> None:
    assert "unbalanced parentheses" in refused("n) + (n").bare_message
    assert "syntax error" in refused("n)\n+ (n").bare_message


def test_multi_line_expressions_report_their_own_lines() -> None:
    assert refused("n +\n  eval(n)").bare_message.startswith(
        "priority 'n +\\n  eval(n)': line 2, column 3: a call to 'eval'")


@pytest.mark.parametrize("source", ["-" * 4000 + "n", "n" + "+n" * 2000, "not " * 1000 + "n"])
def test_deep_nesting_is_a_config_error(source: str) -> None:
    assert "nested too deeply" in refused(source).bare_message


def test_overlong_source() -> None:
    assert refused("n" * 5000).bare_message == (
        "priority expression is 5000 characters long; the limit is 4096")


def test_long_but_shallow_source_is_fine() -> None:
    assert value("n" + " + n" * 300, n=1) == 301.0


def test_a_nan_priority_is_an_error_that_names_the_expression() -> None:
    expr = compile_priority("x * 2", ["x"])
    with pytest.raises(ValueError, match=r"priority 'x \* 2' gave nan"):
        expr({"x": float("nan")})


@pytest.mark.parametrize(("source", "part", "why"), [
    # 9**9**9 passed check, then failed every call (OverflowError, past 65,536 bits)
    ("9**9**9", "9 ** 9 ** 9", "OverflowError: integer power too large"),
    ("n + 9**9**9", "9 ** 9 ** 9", "OverflowError"),
    ("len(query) * 10**100000", "10 ** 100000", "OverflowError"),
    ("n / (1 - 1)", "n / (1 - 1)", None),  # (a name in it: left to the call)
    ("len(query) + 1 / 0", "1 / 0", "ZeroDivisionError: division by zero"),
    ("n + len('ab' * 10**7)", "'ab' * 10 ** 7", "OverflowError: sequence repetition"),
    ("'high'", "'high'", "TypeError: priority \"'high'\" gave str 'high', not a number"),
    ("len(9**9**9)", "9 ** 9 ** 9", "OverflowError"),
    ("n + max(1, 'a')", "max(1, 'a')", "TypeError"),
    ("2**10000", "2 ** 10000", "OverflowError: int too large to convert to float"),
    # (a slice's bounds: test_priority_slice_bounds.py)
    ("len(query[1/0:])", "1 / 0", "ZeroDivisionError: division by zero"),
    ("len(query[:n // (2 - 2)])", None, None),  # (reads n: left to the call)
    ("len(query[n:1/0])", "1 / 0", "ZeroDivisionError"),
    ("len(query[::0])", "the slice step 0", "ValueError: slice step cannot be zero"),
    ("len(query[1:2, ::0])", "the slice step 0", "ValueError: slice step cannot be zero"),
    ("len(query[n:n:1-1])", "the slice step 1 - 1", "ValueError: slice step cannot be zero"),
    ("len(query[::0.0])", "the slice step 0.0", "ValueError: slice step cannot be zero"),
])
def test_a_part_of_literals_that_fails_every_call_is_refused_at_check(
        source: str, part: str, why: str | None) -> None:
    if why is None:
        compile_priority(source, PARAMS)
        return
    with pytest.raises(ConfigError) as info:
        compile_priority(source, PARAMS)
    said = str(info.value)
    assert said.startswith(f"priority {source!r}: line 1, column "), said
    assert f"{part} fails on every call ({why}" in said, said


@pytest.mark.parametrize("source", [
    "1", "-1", "2 ** -1", "10 ** 300 * n", "(-1) ** 10**9", "n ** 2 + 2 ** 16",
    "len(query * 3)", "max(n, 10**6)", "n or 1 / 0", "n > 0 and 1 / 0",
    "n < 1 < 1 / 0", "1.5e308 * 10 + n",
])
def test_sensible_parts_of_literals_are_taken(source: str) -> None:
    # (what is evaluated only as another part decides, after `or`, `and` or the first
    # comparison of a chain, may never be: left to the call)
    compile_priority(source, PARAMS)
