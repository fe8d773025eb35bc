"""What a module's source declares, read with ``ast`` only (the module is never imported).

The top-level functions with their parameter names (entrypoints, interfaces, priority and
cache parameters), and the ``use("name")`` calls (interfaces the module will ask for).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polybus.config.boundnames import BoundName, bound_names, follow_import
from polybus.config.usecalls import (
    UseCallSite,
    is_use,
    module_names,
    rebound_functions,
    use_call_sites,
    use_names,
)
from polybus.errors import ConfigError

__all__ = ["FunctionInfo", "OpaqueDefault", "SourceInfo", "UseCall", "binder", "call_error",
           "call_signature", "defaults", "inspect_source", "scalar_annotations"]


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    params: tuple[str, ...]
    lineno: int
    required: tuple[str, ...] = ()         # named parameters without a default
    positional_only: tuple[str, ...] = ()
    var_keyword: bool = False              # takes **kwargs
    signature: str = ""                    # "f(x, y=2, *, scale=1)", as written
    # its definition, for call_error (the file is parsed once)
    node: ast.FunctionDef | ast.AsyncFunctionDef | None = field(
        default=None, compare=False, repr=False)
    # the file that defines it, when it is not the module's own: a function the module
    # imports from another of the program's (config/boundnames.py)
    file: Path | None = None


@dataclass(frozen=True)
class UseCall:
    """``use("name")`` with a string literal, at ``lineno`` (1-based) / ``col`` (0-based)."""

    name: str
    lineno: int
    col: int


@dataclass(frozen=True)
class SourceInfo:
    path: Path
    functions: dict[str, FunctionInfo]
    uses: tuple[UseCall, ...]
    # use() called with something other than a string literal: which names it uses
    # cannot be known from the source
    dynamic_use: bool = False
    # the calls of names bound by use("name") (config/usecalls.py)
    calls: tuple[UseCallSite, ...] = ()
    # top-level functions whose name something else binds too: their signature is not
    # known from their def (config/usecalls.py)
    rebound: frozenset[str] = frozenset()
    # its other top-level names (imported, assigned, classes: config/boundnames.py), and
    # whether it may bind names its source does not show (``import *``, ``globals()``)
    others: dict[str, BoundName] = field(default_factory=dict)
    open_names: bool = False
    _followed: dict[str, FunctionInfo | None] = field(
        default_factory=dict, compare=False, repr=False)

    def public(self) -> list[str]:
        """Top-level functions not starting with ``_``: the interfaces when none is defined."""
        return [n for n in self.functions if not n.startswith("_")]

    def function(self, name: str) -> FunctionInfo | None:
        """The function that serving ``name`` calls, when the source shows it: a ``def``
        of the module, or one of another module of the program that it imports (its
        ``file`` set); None for anything else."""
        fn = self.functions.get(name)
        if fn is not None or name not in self.others:
            return fn
        if name not in self._followed:
            other = self.others[name]
            found = follow_import(self.path, other.source) if other.source else None
            self._followed[name] = None if found is None else dataclasses.replace(
                _info(found[1]), file=found[0])
        return self._followed[name]

    def servable(self, name: str) -> bool:
        """Whether serving ``name`` may work, as far as the source shows: a function of
        the module, or another name it binds that may hold one (not a module or a
        literal), or any name at all in a module that binds names it does not show."""
        if name in self.functions:
            return True
        other = self.others.get(name)
        return (not other.kind) if other is not None else self.open_names

    def offers(self, name: str) -> bool:
        """Whether a module without a define table would serve ``name`` if something
        named it: a public function, or another public name it binds that may hold one
        (`servable`)."""
        return not name.startswith("_") and self.servable(name) and (
            name in self.functions or name in self.others)

    def file_of(self, fn: FunctionInfo) -> Path:
        """The file that defines ``fn``, one of this module's functions."""
        return fn.file or self.path


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    if a.vararg is not None:
        names.append(a.vararg.arg)
    names.extend(p.arg for p in a.kwonlyargs)
    if a.kwarg is not None:
        names.append(a.kwarg.arg)
    return tuple(names)


def _required(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    without = positional[:len(positional) - len(a.defaults)]
    kwonly = [p for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    return tuple(p.arg for p in (*without, *kwonly))


def _info(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> FunctionInfo:
    return FunctionInfo(fn.name, _params(fn), fn.lineno, _required(fn),
                        tuple(p.arg for p in fn.args.posonlyargs), fn.args.kwarg is not None,
                        f"{fn.name}({ast.unparse(fn.args)})", fn)


def _use_calls(tree: ast.Module, bare_use: bool) -> tuple[list[UseCall], bool]:
    """Calls of polybus's ``use`` whose first argument is a string literal, and whether
    any other call of it was seen (a name built at run time).

    ``bare_use`` counts any call of a plain name ``use`` (the client module); otherwise only
    names imported from polybus (``from polybus import use as u``, ``import polybus as pb``).
    """
    funcs, modules = use_names(tree, bare_use)
    found: list[UseCall] = []
    dynamic = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not is_use(node, funcs, modules):
            continue
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append(UseCall(first.value, node.lineno, node.col_offset))
        else:
            dynamic = True
    found.sort(key=lambda u: (u.lineno, u.col))
    return found, dynamic


def inspect_source(path: Path, *, client: bool) -> SourceInfo:
    """Read and parse ``path``; ConfigError (no file/key) when it cannot be read or parsed."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read source file {str(path)!r}: {e}") from None
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise ConfigError(f"source file {str(path)!r} has a syntax error at line {e.lineno}: "
                          f"{e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise ConfigError(f"source file {str(path)!r} cannot be parsed: "
                          f"{type(e).__name__}") from None
    functions: dict[str, FunctionInfo] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions[node.name] = _info(node)
    try:  # (a tree that parses may still be too deep for these walks of it)
        uses, dynamic = _use_calls(tree, client)
        names = module_names(tree)
        return SourceInfo(path, functions, tuple(uses), dynamic,
                          tuple(use_call_sites(tree, client)) if uses else (),
                          rebound_functions(tree, names), bound_names(tree, names, functions),
                          names.dynamic or names.star)
    except RecursionError:
        raise ConfigError(f"source file {str(path)!r} cannot be parsed: RecursionError") \
            from None


class OpaqueDefault:
    """Stands for a default that is not a literal (``x=SIZE``, ``x=f()``): its value is
    known only where the module is imported, not from its source."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _default(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return OpaqueDefault(ast.unparse(node))


def _stand_in(fn: FunctionInfo, filename: str, body: list[ast.stmt]) -> Any:
    """A function with ``fn``'s parameters, no annotations, no decorators and ``body``,
    its defaults None; none of the user's expressions runs in making it."""
    node = fn.node
    assert node is not None
    stub = copy.deepcopy(node)
    stub.body, stub.returns, stub.decorator_list = body, None, []
    a = stub.args
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
        if arg is not None:
            arg.annotation = None
    a.defaults = [ast.Constant(None) for _ in a.defaults]
    a.kw_defaults = [None if d is None else ast.Constant(None) for d in a.kw_defaults]
    module = ast.fix_missing_locations(ast.Module(body=[stub], type_ignores=[]))
    space: dict[str, object] = {}
    exec(compile(module, filename, "exec"), space)  # (a signature and ``body``: safe)
    return space[fn.name]


def binder(fn: FunctionInfo, filename: str,
           names: Iterable[str]) -> Callable[..., dict[str, Any]]:
    """A stand-in for ``fn`` (of the file ``filename``) that binds its arguments as
    ``fn`` would, defaults filled in, and returns the values of the parameters ``names``
    (a priority expression's). A literal default is its value; any other is an
    `OpaqueDefault` (the module is not imported). A call ``fn`` could not take raises
    TypeError as ``fn`` would (``sample() missing 1 required positional argument: 'n'``)."""
    node = fn.node
    assert node is not None
    wanted = [n for n in fn.params if n in set(names)]
    ret = ast.Return(ast.Dict([ast.Constant(n) for n in wanted],
                              [ast.Name(n, ast.Load()) for n in wanted]))
    stand_in = _stand_in(fn, filename, [ret])
    given = defaults(fn)
    a = node.args
    stand_in.__defaults__ = tuple(given[p.arg] for p in (*a.posonlyargs, *a.args)
                                  if p.arg in given) or None
    stand_in.__kwdefaults__ = {p.arg: given[p.arg] for p in a.kwonlyargs
                               if p.arg in given} or None
    return stand_in  # type: ignore[no-any-return]


def defaults(fn: FunctionInfo) -> dict[str, object]:
    """``fn``'s parameters that have a default, with it: its value when it is a literal,
    else an `OpaqueDefault`."""
    if fn.node is None:
        return {}
    a = fn.node.args
    positional = [*a.posonlyargs, *a.args]
    out = {p.arg: _default(d) for p, d in zip(positional[len(positional) - len(a.defaults):],
                                              a.defaults, strict=True)}
    out.update((p.arg, _default(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
               if d is not None)
    return out


def call_error(fn: FunctionInfo, filename: str, args: tuple[object, ...],
               kwargs: dict[str, object]) -> str | None:
    """Why calling the top-level function ``fn`` (of the file ``filename``) with ``args``
    and ``kwargs`` would fail before its first line (too many arguments, a missing or
    unknown one), or None. The module is not imported: a stand-in with the same
    parameters, its defaults None and no annotations (so none of the user's expressions
    runs), is bound instead. A decorated function may take other arguments than it
    declares: None."""
    sig = call_signature(fn, filename)
    if sig is None:
        return None
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def call_signature(fn: FunctionInfo, filename: str) -> inspect.Signature | None:
    """The signature calls of ``fn`` bind to (`call_error`), or None for a decorated
    function, which may take other arguments than it declares."""
    if fn.node is None or fn.node.decorator_list:
        return None
    return inspect.signature(_stand_in(fn, filename, [ast.Pass()]))


_SCALARS = frozenset({"int", "float", "bool", "str"})


def _scalar(node: ast.expr | None) -> bool:
    """Whether an annotation says a scalar: ``int``, ``float``, ``bool``, ``str``, ``None``,
    a union of them (``int | None``, ``Optional[float]``), or such an annotation quoted."""
    if isinstance(node, ast.Name):
        return node.id in _SCALARS
    if isinstance(node, ast.Constant):
        if node.value is None:
            return True
        if isinstance(node.value, str):  # ("int", a forward reference)
            try:
                return _scalar(ast.parse(node.value, mode="eval").body)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return False
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _scalar(node.left) and _scalar(node.right)
    if isinstance(node, ast.Subscript):  # Optional[int], typing.Optional[int]
        name = node.value
        if (isinstance(name, ast.Name) and name.id == "Optional") or (
                isinstance(name, ast.Attribute) and name.attr == "Optional"):
            return _scalar(node.slice)
    return False


def scalar_annotations(fn: FunctionInfo) -> dict[str, str]:
    """``fn``'s parameters annotated as scalars (see `_scalar`), with the annotation as
    written; ``*args: int`` counts (each extra argument is one)."""
    if fn.node is None:
        return {}
    a = fn.node.args
    return {p.arg: ast.unparse(p.annotation)
            for p in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg)
            if p is not None and p.annotation is not None and _scalar(p.annotation)}
