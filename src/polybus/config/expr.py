"""The priority expression language: a small, safe subset of Python expressions.

``define.compare = { priority = "len(query)" }`` orders a replica's waiting calls by the
value of the expression over the call's arguments (larger first is the caller's rule, not
ours). The source is parsed with ``ast`` once, checked against a whitelist, and evaluated
by walking the checked tree; the user's string never reaches ``eval``.

Allowed: parameter names; int, float, str, True/False/None literals; ``+ - * / // % **``;
unary ``- + not``; comparisons (including ``in`` and ``is``); ``and``/``or``; calls of
``len min max abs``; attribute access (no name starting with ``_``); subscripts and
slices. Everything else is a ConfigError naming the line, column and construct.
"""

from __future__ import annotations

import ast
import functools
import numbers
import operator
from collections.abc import Callable, Mapping
from typing import Any

from polybus.config.problems import nearest
from polybus.errors import ConfigError

__all__ = ["PriorityExpr", "compile_priority"]

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
    ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_CALLS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    # name: (function, fewest args, most args)
    "len": (len, 1, 1), "abs": (abs, 1, 1), "min": (min, 1, None), "max": (max, 1, None),
}
_CONSTANT_TYPES = (int, float, str, bool, type(None))
_MAX_POW_BITS = 1 << 16          # an int ** int result larger than this is refused
_MAX_REPEAT = 1 << 20            # a sequence * int result longer than this is refused
MAX_SOURCE = 4096                # characters in one priority expression

_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Lambda: "a lambda", ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension", ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression", ast.NamedExpr: "an assignment expression (:=)",
    ast.JoinedStr: "an f-string", ast.FormattedValue: "an f-string", ast.IfExp:
    "a conditional expression (x if c else y)", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.Starred: "a starred expression (*x)",
    ast.List: "a list display", ast.Tuple: "a tuple display", ast.Set: "a set display",
    ast.Dict: "a dict display", ast.BitAnd: "the operator &", ast.BitOr: "the operator |",
    ast.BitXor: "the operator ^", ast.LShift: "the operator <<", ast.RShift: "the operator >>",
    ast.MatMult: "the operator @", ast.Invert: "the operator ~",
}


def _where(node: ast.AST) -> str:
    line = getattr(node, "lineno", 1)
    column = getattr(node, "col_offset", 0) + 1
    return f"line {line}, column {column}"


class _Checker:
    """Walks a parsed expression and refuses anything outside the language."""

    def __init__(self, source: str, params: list[str]) -> None:
        self.source = source
        self.params = params
        self.names: set[str] = set()

    def refuse(self, node: ast.AST, what: str, hint: str | None = None) -> ConfigError:
        return ConfigError(f"priority {self.source!r}: {_where(node)}: {what} is not allowed "
                           "in a priority expression", hint=hint)

    def construct(self, node: ast.AST) -> ConfigError:
        what = _CONSTRUCTS.get(type(node), f"the construct {type(node).__name__!r}")
        return self.refuse(node, what)

    def check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, _CONSTANT_TYPES):
                raise self.refuse(node, f"the literal {node.value!r}",
                                  "literals are int, float, str, True, False, None")
        elif isinstance(node, ast.Name):
            if node.id not in self.params:
                if node.id in _CALLS:
                    raise self.refuse(node, f"{node.id!r} other than in a call")
                hint = nearest(node.id, self.params) or (
                    "parameters: " + ", ".join(self.params) if self.params else "no parameters")
                raise ConfigError(f"priority {self.source!r}: {_where(node)}: name {node.id!r} "
                                  "is not a parameter of the interface", hint=hint)
            self.names.add(node.id)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                raise self.refuse(node, _CONSTRUCTS.get(type(node.op), "this operator"))
            self.check(node.left)
            self.check(node.right)
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise self.refuse(node, _CONSTRUCTS.get(type(node.op), "this operator"))
            self.check(node.operand)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                self.check(v)
        elif isinstance(node, ast.Compare):
            self.check(node.left)
            for c in node.comparators:
                self.check(c)
        elif isinstance(node, ast.Call):
            self.check_call(node)
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                at = ast.Name(id=node.attr, lineno=node.end_lineno or node.lineno,
                              col_offset=(node.end_col_offset or 0) - len(node.attr))
                raise self.refuse(at, f"the attribute {node.attr!r} (starts with '_')")
            self.check(node.value)
        elif isinstance(node, ast.Subscript):
            self.check(node.value)
            if isinstance(node.slice, ast.Tuple):  # a[i, j] for arrays
                for e in node.slice.elts:
                    self.check(e)
            else:
                self.check(node.slice)
        elif isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.check(part)
        else:
            raise self.construct(node)

    def check_call(self, node: ast.Call) -> None:
        allowed = "only len, min, max, abs may be called"
        if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS:
            try:
                callee = ast.unparse(node.func)
            except Exception:  # pragma: no cover - unparse handles every parsed node
                callee = "?"
            raise self.refuse(node, f"a call to {callee!r}", allowed)
        if node.keywords:
            raise self.refuse(node, f"a keyword argument in the call to {node.func.id!r}")
        _, fewest, most = _CALLS[node.func.id]
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.construct(a)
            self.check(a)
        n = len(node.args)
        if n < fewest or (most is not None and n > most):
            count = f"{fewest}" if most == fewest else f"at least {fewest}"
            raise ConfigError(f"priority {self.source!r}: {_where(node)}: {node.func.id}() "
                              f"takes {count} argument(s), got {n}")


def _pow(base: Any, exp: Any) -> Any:
    if (isinstance(base, int) and isinstance(exp, int) and exp > 0 and abs(base) > 1
            and abs(base).bit_length() * exp > _MAX_POW_BITS):
        raise OverflowError("integer power too large in a priority expression")
    return base ** exp


def _mul(a: Any, b: Any) -> Any:
    for seq, n in ((a, b), (b, a)):
        if (isinstance(seq, str | bytes | list | tuple) and isinstance(n, int)
                and len(seq) * n > _MAX_REPEAT):
            raise OverflowError("sequence repetition too large in a priority expression")
    return a * b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, str | bytes):
        raise TypeError("string formatting with % is not supported in a priority expression")
    return a % b


_SAFE_BINOPS = dict(_BINOPS)
_SAFE_BINOPS.update({ast.Pow: _pow, ast.Mult: _mul, ast.Mod: _mod})


def _evaluate(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _SAFE_BINOPS[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, env))
    if isinstance(node, ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        value: Any = None
        for v in node.values:
            value = _evaluate(v, env)
            if bool(value) != is_and:
                return value
        return value
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(comp, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        return _CALLS[node.func.id][0](*(_evaluate(a, env) for a in node.args))
    if isinstance(node, ast.Attribute):
        return getattr(_evaluate(node.value, env), node.attr)
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Tuple):
            key: Any = tuple(_evaluate(e, env) for e in node.slice.elts)
        else:
            key = _evaluate(node.slice, env)
        return _evaluate(node.value, env)[key]
    if isinstance(node, ast.Slice):
        return slice(*(None if p is None else _evaluate(p, env)
                       for p in (node.lower, node.upper, node.step)))
    raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover


class PriorityExpr:
    """A checked priority expression; call it with the call's bound arguments."""

    __slots__ = ("_body", "names", "source")

    def __init__(self, source: str, body: ast.expr, names: frozenset[str]) -> None:
        self.source = source
        self.names = names          # the parameters the expression reads
        self._body = body

    def __call__(self, bound: Mapping[str, Any]) -> float:
        result = _evaluate(self._body, bound)
        if not isinstance(result, numbers.Real):
            raise TypeError(f"priority {self.source!r} gave {type(result).__name__} "
                            f"{result!r:.40}, not a number")
        value = float(result)
        if value != value:  # NaN: ordered neither before nor after any other call
            raise ValueError(f"priority {self.source!r} gave nan, not a number to order by")
        return value

    def __repr__(self) -> str:
        return f"PriorityExpr({self.source!r})"


def compile_priority(source: str, params: list[str]) -> PriorityExpr:
    """Parse and check ``source`` against the interface's parameter names ``params``.

    Raises ConfigError (without file or key) naming line, column and the refused construct.
    """
    if not isinstance(source, str):
        raise ConfigError(f"expected a priority expression string, got {source!r}")
    text = source.strip()
    if not text:
        raise ConfigError("empty priority expression", hint="e.g. 'len(query)'")
    if len(text) > MAX_SOURCE:
        raise ConfigError(f"priority expression is {len(text)} characters long; the limit is "
                          f"{MAX_SOURCE}")
    too_deep = ConfigError(f"priority {source!r:.60}: the expression is nested too deeply")
    # Wrapped in parentheses on lines of their own so an expression may span lines (as
    # in a TOML multi-line string); columns stay as written and lines shift by one.
    try:
        tree = ast.parse(f"(\n{text}\n)", mode="eval")
    except SyntaxError as e:
        lines = text.split("\n")
        line = max((e.lineno or 2) - 1, 1)
        column = max(e.offset or 1, 1)
        if line > len(lines):  # found at the closing parenthesis: the text ended too soon
            line, column = len(lines), len(lines[-1]) + 1
        raise ConfigError(f"priority {source!r}: line {line}, column {column}: "
                          f"syntax error: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise too_deep from None
    body = tree.body
    last = text.count("\n") + 2
    if body.lineno < 2 or (body.end_lineno or last) > last:
        raise ConfigError(f"priority {source!r}: line 1, column 1: syntax error: "
                          "unbalanced parentheses")
    ast.increment_lineno(body, -1)
    checker = _Checker(source, list(params))
    try:
        checker.check(body)
        _check_literals(source, body)
    except RecursionError:
        raise too_deep from None
    expr = PriorityExpr(source, body, frozenset(checker.names))
    if not checker.names:  # (of literals alone: one value, a number or no call's)
        _fails(source, body, lambda: expr({}))
    return expr


_FAILURES = (ArithmeticError, TypeError, ValueError, LookupError, AttributeError)


def _fails(source: str, node: ast.AST, compute: Callable[[], object], what: str = "") -> None:
    """ConfigError if ``compute()`` (of ``node``, a part of literals alone) fails: it
    would fail every call the same way (``9**9**9`` passed check). ``what`` names the
    part before its text (``the slice bound``)."""
    try:
        compute()
    except _FAILURES as exc:
        part = f"{what} {ast.unparse(node)}" if what else ast.unparse(node)
        raise ConfigError(f"priority {source!r}: {_where(node)}: {part} fails "
                          f"on every call ({type(exc).__name__}: {exc})",
                          hint="a part of the expression of literals alone is computed as "
                               "the configuration loads, within the bounds a call has "
                               f"(an integer power of at most {_MAX_POW_BITS:,} bits, a "
                               f"repetition of at most {_MAX_REPEAT:,} items)") from None


def _reads(node: ast.AST) -> bool:
    """Whether ``node`` reads a parameter (a name other than a call's ``len``...)."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and id(n) not in called for n in ast.walk(node))


def _check_literals(source: str, node: ast.AST) -> None:
    """Compute each largest part of ``node`` made of literals alone that every call
    computes, refusing one that fails (`_fails`). What is computed only as another part
    decides (after ``and``/``or``, past a chain's first comparison) is left to the call:
    it may never be. Bounded as a call is (`_pow`, `_mul`), so this is cheap."""
    if isinstance(node, ast.Tuple):  # (a[1, 0]'s index: its items, each)
        for item in node.elts:
            _check_literals(source, item)
        return
    if isinstance(node, ast.Slice):
        _check_slice(source, node)
        return
    if not _reads(node):
        if isinstance(node, ast.expr) and not isinstance(node, ast.Constant | ast.Slice):
            try:
                _fails(source, node, lambda: _evaluate(node, {}))
            except ConfigError:
                for child in ast.iter_child_nodes(node):  # (the least part that fails named)
                    _check_literals(source, child)
                raise
        return
    if isinstance(node, ast.BoolOp):
        _check_literals(source, node.values[0])
        return
    if isinstance(node, ast.Compare):
        _check_literals(source, node.left)
        _check_literals(source, node.comparators[0])
        return
    for child in ast.iter_child_nodes(node):
        _check_literals(source, child)


def _check_slice(source: str, node: ast.Slice) -> None:
    """Each bound of the slice ``node`` of literals alone, computed: one that fails
    (``1/0``), or a step of 0, fails every call (lists, arrays, strings and pandas
    alike refuse a step of 0). A bound of another type than an integer (``1.5``,
    ``'a'``) is left to the call: a pandas Series takes labels (``s['a':'c']``)."""
    for kind, part in (("bound", node.lower), ("bound", node.upper), ("step", node.step)):
        if part is None:
            continue
        if _reads(part):
            _check_literals(source, part)
            continue
        _check_literals(source, part)  # (its own parts first: 1/0 named as such)
        _fails(source, part, functools.partial(_sliced, part, kind == "step"),
               f"the slice {kind}")


def _sliced(part: ast.expr, step: bool) -> object:
    """The value of ``part``; as a step, ValueError if it is 0, as every sequence
    raises it."""
    value = _evaluate(part, {})
    if step and type(value) in (int, bool, float) and value == 0:
        raise ValueError("slice step cannot be zero")
    return value
