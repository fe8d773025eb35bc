"""A served module's top-level names bound other than by its own ``def``, read with ``ast``.

A replica serves whatever a name holds once its module is imported, if it is callable:
a function imported from another module of the program (``from helpers import render``),
a ``functools.partial``, an instance of a class with ``__call__``. The source says which
of them is a function and what parameters it takes only for an import that leads, file
by file, to a ``def`` of the program (``from helpers import render``, ``from .helpers
import render`` in a package, through any re-exports on the way): that one is checked
as a ``def`` of the module is (its call sites, priority and cache parameters), at the
file and line of its ``def``. Any other is served with its calls checked where they
run, by the replica, as a decorated function's are. Only a name the source shows is not
callable is refused before the run: a module (``import numpy as np``) or a literal
(``SIZE = 3``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from polybus.config.usecalls import ModuleNames, module_names
from polybus.plural import with_article
from polybus.userpackage import package_of

__all__ = ["BoundName", "bound_names", "follow_import"]

_DEPTH = 8  # re-exports followed, at most, from the served module to the def


@dataclass(frozen=True)
class BoundName:
    """A top-level name of the module that no ``def`` of it binds."""

    name: str
    lineno: int        # 0: bound where the source cannot show (``globals()``, ``import *``)
    # what it is when the source shows it cannot be called ("an int", "a module"), else ""
    kind: str = ""
    # the import it comes by, when it comes by one: (module, level, name there)
    source: tuple[str, int, str] | None = None
    node: ast.stmt | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        """The statement that binds it, as written (shortened), or ""."""
        if self.node is None:
            return ""
        try:
            text = " ".join(ast.unparse(self.node).split())
        except RecursionError:  # (parsed and walked, but too deep to write back out)
            return f"class {self.name}: ..." if isinstance(self.node, ast.ClassDef) \
                else f"{self.name} = ..."
        return text if len(text) <= 60 else text[:57] + "..."


def _literal_kind(value: ast.expr) -> str:
    """"an int", "a str", ... for a literal value, else ""."""
    if isinstance(value, ast.JoinedStr):
        return "a str"
    try:
        kind = type(ast.literal_eval(value)).__name__
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ""
    return "None" if kind == "NoneType" else with_article(kind)


def _bindings(node: ast.stmt) -> list[BoundName]:
    """The names the top-level statement ``node`` binds, and to what (`BoundName`)."""
    line = node.lineno
    if isinstance(node, ast.ImportFrom):
        return [BoundName(a.asname or a.name, line, source=(node.module or "", node.level,
                                                              a.name), node=node)
                for a in node.names if a.name != "*"]
    if isinstance(node, ast.Import):
        return [BoundName(a.asname or a.name.partition(".")[0], line, "a module", node=node)
                for a in node.names]
    if isinstance(node, ast.ClassDef):
        return [BoundName(node.name, line, node=node)]
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        named = [t.id for t in targets if isinstance(t, ast.Name)]
        kind = _literal_kind(node.value) if named else ""
        return [BoundName(n, line, kind, node=node) for n in named]
    return []


def bound_names(tree: ast.Module, names: ModuleNames,
                functions: Iterable[str]) -> dict[str, BoundName]:
    """The module's top-level names that are not its ``def``s (``functions``). A name
    bound once, by a statement at the top of the file, is said with that statement; one
    bound more than once, or inside an ``if`` or a ``try``, with nothing known of what
    it is (the last top-level statement binding it, if one does, for its line: what
    ``render = jit(render)`` binds is what a replica serves, not the import before)."""
    own = set(functions)
    out: dict[str, BoundName] = {}
    for node in tree.body:
        for found in _bindings(node):
            if found.name in own:
                continue
            known = found.name in names.once and not names.dynamic
            out[found.name] = found if known else BoundName(found.name, found.lineno,
                                                            node=found.node)
    for name in names.bound - own - set(out):  # (bound inside an if, a try, ...)
        out[name] = BoundName(name, 0)
    return out


# A module file and the folders of the packages it is in, outermost first (userpackage.py)
_Place = tuple[Path, tuple[Path, ...]]


def _module_file(packages: tuple[Path, ...], module: str, level: int,
                 folder: Path, top: Path | None) -> _Place | None:
    """The file of the program that ``from <level dots><module> import ...`` imports
    into a file in ``packages``, and the packages that file is in: for an absolute
    import, the first found below ``folder``, the served module's own (first on the
    import path), then in its top package ``top`` for a name in it (``top.geometry``:
    userpackage.py); for a relative one, below the package it names. None when it is
    not a file of the program: a relative import from a file in no package, or one that
    climbs above the top package, fails when imported (and no file outside the packages
    is read)."""
    parts = module.split(".")
    if level:
        if level > len(packages) or not module:
            return None  # (``from . import x``: x is a module or a name of the package)
        starts = [(packages[len(packages) - level], packages[:len(packages) - level + 1])]
    else:
        starts = [(folder, ())]
        if top is not None and parts[0] == top.name:
            starts.append((top.parent, ()))
    for base, above in starts:
        where = base.joinpath(*parts)
        # (a package comes before a module of the same name, as Python finds them)
        for candidate, inside in ((where / "__init__.py", parts),
                                  (where.with_suffix(".py"), parts[:-1])):
            if candidate.is_file():
                return candidate, above + tuple(base.joinpath(*inside[:i + 1])
                                                for i in range(len(inside)))
    return None


def follow_import(path: Path, source: tuple[str, int, str]) -> tuple[Path, ast.FunctionDef
                                                                      | ast.AsyncFunctionDef] | None:
    """The file and ``def`` that an import into the module ``path`` leads to, through any
    re-exports on the way; None when it leads elsewhere (a module not of the program, a
    name its source binds other than by one ``def``, a file that cannot be read)."""
    seen: set[tuple[Path, str]] = set()
    package = package_of(path)
    packages = package.folders if package is not None else ()
    if path.name == "__init__.py":  # (imported as a package of its own: userpackage.py)
        packages = (path.parent,)
    top = package.top if package is not None else None
    for _ in range(_DEPTH):
        module, level, name = source
        place = _module_file(packages, module, level, path.parent, top)
        if place is None or (place[0].resolve(), name) in seen:
            return None
        file, packages = place
        seen.add((file.resolve(), name))
        try:
            tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
            names = module_names(tree)  # (a tree that parses may still be too deep to walk)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError,
                MemoryError):
            return None
        if names.dynamic or name not in names.once:
            return None  # (bound twice, or maybe otherwise: what it holds is not known)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return file, node
            found = next((b for b in _bindings(node) if b.name == name), None)
            if found is not None:
                if found.source is None:
                    return None
                source = found.source
                break
        else:
            return None
    return None
