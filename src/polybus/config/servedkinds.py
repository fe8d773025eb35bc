"""A served function that cannot answer a call, told from its ``def``: a generator
function (it has ``yield``) returns a generator, which cannot be sent, pickle or not,
and an ``async def`` returns a coroutine, which a replica refuses to call
(worker/module.py). A replica still starts and serves its other functions, each call
of such a one failing; so it is a warning, naming the file, line and function with the
fix, at the binding (or the route) that calls it. A function the served module imports
from another of the program's (boundnames.follow_import) is read there.

A decorated ``def`` is not said: the decorator may make it a plain function (a
``contextlib.contextmanager``). A generator function of a module called in the client
(``replication = 0``) is not either: its generator is passed as it is there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from polybus.config.model import Binding, ModuleSpec, ServeSpec
from polybus.config.problems import Problems, dotted
from polybus.config.source import FunctionInfo, SourceInfo

__all__ = ["note_unanswerable"]

_LIST_HINT = ("return a list instead: build it in the function and return it, or let the "
              "client make one call per item")
_ASYNC_HINT = "make it a def; asyncio.run(...) inside one runs a coroutine"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _yields(node: ast.AST) -> bool:
    """Whether ``node``'s own body (not a function or class inside it) has a yield."""
    todo: list[ast.AST] = list(ast.iter_child_nodes(node))
    while todo:
        child = todo.pop()
        if isinstance(child, ast.Yield | ast.YieldFrom):
            return True
        if not isinstance(child, _SCOPES):
            todo.extend(ast.iter_child_nodes(child))
    return False


def _why(fn: FunctionInfo, info: SourceInfo, in_client: bool) -> tuple[str, str] | None:
    """What ``fn`` is and the hint, when no call of it can be answered; else None."""
    node = fn.node
    if node is None or node.decorator_list or fn.name in info.rebound:
        return None
    where = f"{info.file_of(fn).name}:{node.lineno}"
    if isinstance(node, ast.AsyncFunctionDef):
        return (f"an async def function ({where}: async def {node.name}): every call "
                "fails, its coroutine would never run", _ASYNC_HINT)
    if not in_client and _yields(node):
        return (f"a generator function ({where}: def {node.name} has yield): every call "
                "fails, a generator cannot be sent", _LIST_HINT)
    return None


def _served(bindings: list[Binding], serve: ServeSpec | None) -> Iterator[tuple[str, str, str]]:
    """Each (module, interface, key) a binding or a route calls."""
    for b in bindings:
        yield b.module, b.interface, dotted("bind", f"{b.user}.{b.name}")
    for r in serve.routes if serve is not None else ():
        yield r.module, r.interface, dotted("serve", "routes", r.key)


def note_unanswerable(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                      bindings: list[Binding], serve: ServeSpec | None,
                      p: Problems) -> None:
    """A warning for each served function that is a generator function or an async def,
    once a function (at the first binding or route that calls it)."""
    said: set[tuple[str, str]] = set()
    for module, iface, key in _served(bindings, serve):
        m, info = modules.get(module), infos.get(module)
        if m is None or info is None or (module, iface) in said:
            continue
        fn = info.function(iface)
        why = _why(fn, info, m.in_client) if fn is not None else None
        if why is not None:
            said.add((module, iface))
            p.note(f"interface {iface!r} of module {module!r} is {why[0]}", key, why[1])
