"""The calls a module makes of the names it binds with ``use("name")``, read with ``ast``.

``render = use("render")`` and later ``render(t, gain=2.0)``: the call site, with how many
positional arguments and which keywords it passes, so that `check` can bind them to the
served function's parameters before anything runs (config/callargs.py). Only what the
source says for certain is followed:

- a name is followed in a scope (module, function, class body, comprehension, lambda)
  whose every binding of it is ``name = use("literal")`` (or ``f, g = use("f"),
  use("g")``), the same literal each time;
  any other binding there (a parameter, a loop or ``with`` target, an import, a ``def``,
  ``del``) makes its calls unknown. Lookups go as Python's do: the local scope, then the
  enclosing functions, then the module, never a class body from the functions in it;
- a name any ``global`` or ``nonlocal`` statement, or an assignment expression
  (``:=``), binds is not followed anywhere; nor a name of the module's scope after a
  ``from x import *`` that comes later in the file than its ``use()``, nor any of the
  module's scope in a module that reaches its names by other means than their names
  (``globals()``, ``vars()``, ``exec``, ``sys.modules``: `_reaches_names`);
- a call that unpacks arguments (``*args``, ``**kwargs``) says nothing of how many it
  passes, and is left out; so is a call of an attribute (``m.render(...)``) and
  anything the name is handed to (``map(render, xs)``).

``use("render")(t)`` is a call site of ``render`` too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

__all__ = ["ModuleNames", "UseCallSite", "module_names", "rebound_functions", "use_call_sites", "use_literal", "use_names"]

_SHORT = 72  # a call's text longer than this is said as name(...)


@dataclass(frozen=True)
class UseCallSite:
    """``render(t, gain=2.0)`` at ``lineno`` (1-based) / ``col`` (0-based), where
    ``render`` is ``use("render")``: ``name`` is the literal given to use()."""

    name: str
    lineno: int
    col: int
    text: str
    positional: int
    keywords: tuple[str, ...]


def use_names(tree: ast.Module, bare_use: bool) -> tuple[set[str], set[str]]:
    """The names polybus's ``use`` is called by (``use``, ``u`` after ``from polybus
    import use as u``; any plain ``use`` when ``bare_use``) and the names polybus itself
    is imported as (``pb`` of ``pb.use``)."""
    funcs = {"use"} if bare_use else set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "polybus":
            funcs.update(a.asname or a.name for a in node.names if a.name == "use")
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name == "polybus")
    return funcs, modules


def is_use(node: ast.Call, funcs: set[str], modules: set[str]) -> bool:
    f = node.func
    return (isinstance(f, ast.Name) and f.id in funcs) or (
        isinstance(f, ast.Attribute) and f.attr == "use"
        and isinstance(f.value, ast.Name) and f.value.id in modules)


def use_literal(node: ast.AST, funcs: set[str], modules: set[str]) -> str | None:
    """``"render"`` when ``node`` is ``use("render")`` (a string literal, alone)."""
    if not isinstance(node, ast.Call) or not is_use(node, funcs, modules) \
            or len(node.args) != 1 or node.keywords:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
        else None


@dataclass(eq=False)
class _Scope:
    parent: _Scope | None
    is_class: bool = False
    # name -> what each binding of it in this scope is: use()'s literal, or None (other)
    binds: dict[str, list[str | None]] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)
    star_lines: list[int] = field(default_factory=list)

    def bind(self, name: str, literal: str | None, line: int) -> None:
        self.binds.setdefault(name, []).append(literal)
        self.first_line[name] = min(line, self.first_line.get(name, line))


class _Reader(ast.NodeVisitor):
    """Walks one module: the bindings of each scope, and each call of a plain name."""

    def __init__(self, funcs: set[str], modules: set[str]) -> None:
        self.funcs, self.modules = funcs, modules
        self.dynamic = False  # the module's names may be bound through its namespace
        self.scope = _Scope(None)
        self.module = self.scope
        self.tainted: set[str] = set()  # global, nonlocal, :=
        # names bound in the module's scope from anywhere: global, :=, a function's
        # parameters set (``f.__defaults__ = ...``, ``setattr(f, ...)``)
        self.anywhere: set[str] = set()
        self.calls: list[tuple[_Scope, str | None, str, ast.Call]] = []

    def _in(self, scope: _Scope, nodes: list[ast.AST]) -> None:
        outer, self.scope = self.scope, scope
        try:
            for n in nodes:
                self.visit(n)
        finally:
            self.scope = outer

    def _bind_args(self, scope: _Scope, args: ast.arguments, line: int) -> None:
        for a in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
            if a is not None:
                scope.bind(a.arg, None, line)

    def _outer_parts(self, args: ast.arguments) -> list[ast.AST]:
        """What of a function's signature runs where it is defined: defaults, annotations."""
        parts: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d)]
        for a in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
            if a is not None and a.annotation is not None:
                parts.append(a.annotation)
        return parts

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.bind(node.name, None, node.lineno)
        self._in(self.scope, [*node.decorator_list, *self._outer_parts(node.args),
                              *([node.returns] if node.returns else [])])
        inner = _Scope(self.scope)
        self._bind_args(inner, node.args, node.lineno)
        self._in(inner, list(node.body))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._in(self.scope, self._outer_parts(node.args))
        inner = _Scope(self.scope)
        self._bind_args(inner, node.args, node.lineno)
        self._in(inner, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.bind(node.name, None, node.lineno)
        self._in(self.scope, [*node.decorator_list, *node.bases, *node.keywords])
        self._in(_Scope(self.scope, is_class=True), list(node.body))

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp
                       | ast.DictComp) -> None:
        gens = node.generators
        self.visit(gens[0].iter)  # (evaluated in the enclosing scope)
        parts: list[ast.AST] = []
        for i, g in enumerate(gens):
            parts += [g.target, *([g.iter] if i else []), *g.ifs]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._in(_Scope(self.scope), parts)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Assign(self, node: ast.Assign) -> None:
        target, value = node.targets[0], node.value
        if len(node.targets) == 1 and isinstance(target, ast.Tuple | ast.List) \
                and isinstance(value, ast.Tuple | ast.List) \
                and len(target.elts) == len(value.elts) \
                and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
            pairs = list(zip(target.elts, value.elts, strict=True))  # f, g = use("f"), ...
        else:
            pairs = [(target, value)] if len(node.targets) == 1 else []
        if not pairs or not all(isinstance(t, ast.Name) for t, _ in pairs):
            self.generic_visit(node)
            return
        for t, v in pairs:
            assert isinstance(t, ast.Name)
            literal = use_literal(v, self.funcs, self.modules)
            self.scope.bind(t.id, literal, node.lineno)
            if literal is None:
                self.visit(v)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        literal = use_literal(node.value, self.funcs, self.modules) if node.value else None
        if literal is not None and isinstance(node.target, ast.Name):
            self.scope.bind(node.target.id, literal, node.lineno)
            self.visit(node.annotation)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):  # (Store, Del)
            self.scope.bind(node.id, None, node.lineno)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.tainted.add(node.target.id)
        self.anywhere.add(node.target.id)  # (one in a comprehension: the enclosing scope's)
        self.visit(node.value)

    def visit_Global(self, node: ast.Global) -> None:
        self.tainted.update(node.names)
        self.anywhere.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.tainted.update(node.names)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.dynamic = self.dynamic or _reaches_names(node)
        for a in node.names:
            if a.name == "*":
                self.scope.star_lines.append(node.lineno)
            else:
                self.scope.bind(a.asname or a.name.partition(".")[0], None, node.lineno)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.scope.bind(node.name, None, node.lineno)
        self.generic_visit(node)

    def _match_name(self, node: ast.MatchAs | ast.MatchStar) -> None:
        if node.name:
            self.scope.bind(node.name, None, node.lineno)
        self.generic_visit(node)

    visit_MatchAs = visit_MatchStar = _match_name

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.scope.bind(node.rest, None, node.lineno)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.dynamic = self.dynamic or _reaches_names(node)
        if not isinstance(node.ctx, ast.Load) and node.attr in _CALLING_ATTRS \
                and isinstance(node.value, ast.Name):
            self.anywhere.add(node.value.id)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        self.dynamic = self.dynamic or _reaches_names(node)
        if isinstance(f, ast.Name):
            self.calls.append((self.scope, None, f.id, node))
            if f.id in ("setattr", "delattr") and node.args \
                    and isinstance(node.args[0], ast.Name):
                self.anywhere.add(node.args[0].id)
        else:
            literal = use_literal(f, self.funcs, self.modules)
            if literal is not None:
                self.calls.append((self.scope, literal, literal, node))
        self.generic_visit(node)

    def resolve(self, scope: _Scope, name: str) -> str | None:
        """What ``name`` is where ``scope`` looks it up: use()'s literal, if followed."""
        s: _Scope | None = scope
        while s is not None:
            if s is scope or not s.is_class:
                binds = s.binds.get(name)
                if binds is not None:
                    if s is self.module and self.dynamic:
                        return None
                    literal = binds[0]
                    if literal is None or any(b != literal for b in binds) \
                            or name in self.tainted \
                            or any(line > s.first_line[name] for line in s.star_lines):
                        return None
                    return literal
            s = s.parent
        return None


def _site(name: str, node: ast.Call) -> UseCallSite | None:
    if any(isinstance(a, ast.Starred) for a in node.args) \
            or any(k.arg is None for k in node.keywords):
        return None
    text = ast.unparse(node)
    if len(text) > _SHORT:
        text = f"{ast.unparse(node.func)}(...)"
    return UseCallSite(name, node.lineno, node.col_offset, text, len(node.args),
                       tuple(k.arg for k in node.keywords if k.arg is not None))


def use_call_sites(tree: ast.Module, bare_use: bool) -> list[UseCallSite]:
    """The calls in ``tree`` of names bound by ``use("name")`` (see the module's doc),
    in the order of the file. ``bare_use``: as for `use_names`."""
    funcs, modules = use_names(tree, bare_use)
    if not funcs and not modules:
        return []
    reader = _Reader(funcs, modules)
    reader.visit(tree)
    found = []
    for scope, literal, name, node in reader.calls:
        used = literal if literal is not None else reader.resolve(scope, name)
        site = _site(used, node) if used is not None else None
        if site is not None:
            found.append(site)
    found.sort(key=lambda s: (s.lineno, s.col))
    return found


_NAMESPACE_CALLS = frozenset({"globals", "vars", "exec"})
_CALLING_ATTRS = frozenset({"__defaults__", "__kwdefaults__", "__code__"})


def _reaches_names(node: ast.AST) -> bool:
    """Whether ``node`` shows its module may bind its top-level names other than by name,
    where ``ast`` cannot follow: ``globals()["f"] = g``, ``vars()``, ``exec(...)``, or
    ``sys.modules`` (``setattr(sys.modules[__name__], "f", g)``)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in _NAMESPACE_CALLS
    if isinstance(node, ast.Attribute):
        return node.attr == "modules" and isinstance(node.value, ast.Name) \
            and node.value.id == "sys"
    return isinstance(node, ast.ImportFrom) and node.module == "sys" \
        and any(a.name == "modules" for a in node.names)


def rebound_functions(tree: ast.Module, names: ModuleNames | None = None) -> frozenset[str]:
    """The names of the module's top-level functions that something else binds too in
    the module's scope (a second ``def``, an assignment, an import, a later ``from m
    import *``, ``global``), or whose
    parameters it sets (``f.__defaults__ = ...``, ``setattr(f, ...)``), and all of them
    in a module that reaches its names otherwise (`_reaches_names`): a replica calls
    whatever the name holds once the module is imported, which may take other
    arguments. A function's or a class's own names (a local ``f``, a method ``f``) are
    not the module's. ``names``: `module_names` of ``tree``, if known already."""
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    names = names or module_names(tree)
    if names.dynamic:
        return frozenset(n.name for n in defs)
    return frozenset(n.name for n in defs if n.name not in names.once)


@dataclass(frozen=True)
class ModuleNames:
    """The names a module's scope binds, as its source shows them."""

    bound: frozenset[str]  # by any statement of the module's scope
    # bound by one statement, and by nothing else: no ``global`` or ``:=`` elsewhere,
    # no ``setattr(f, ...)`` or ``f.__defaults__ = ...``, no later ``from m import *``
    once: frozenset[str]
    # the module may bind names its source does not show (`_reaches_names`)
    dynamic: bool
    star: bool  # a ``from m import *`` in its scope: it may bind any name


def module_names(tree: ast.Module) -> ModuleNames:
    """What ``tree``'s module scope binds (`ModuleNames`)."""
    reader = _Reader(set(), set())
    reader.visit(tree)
    module = reader.module
    once = {n for n, binds in module.binds.items() if len(binds) == 1
            and n not in reader.anywhere  # (what a later star import brings is unknown)
            and not any(module.first_line[n] < line for line in module.star_lines)}
    return ModuleNames(frozenset(module.binds), frozenset(once), reader.dynamic,
                       bool(module.star_lines))
