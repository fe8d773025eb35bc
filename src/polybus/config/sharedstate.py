"""State kept in a replicated module's globals: noted, as the files cannot prove it wrong.

Each replica is a process that imports the module itself, and so is each child of a
``pool = "processes:N"``: a global changed by its functions (a dict used as a store, a
counter) is that process's own, and calls are not routed by what they touch, so a
``put`` and a later ``get`` may reach different copies (docs/strategies.md, "State in
a replicated module"). A new user's replicated key-value module gave ``get: [0, 1, None,
3]`` and nothing said why. Read with ``ast`` only (the module is never imported); a
change the source does not show (through another module, ``globals()``) is not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from polybus.config.model import ModuleSpec
from polybus.config.problems import Problems, dotted
from polybus.config.source import SourceInfo

__all__ = ["Change", "global_changes", "note_split_state"]

# Calls that change a container in place (list, dict, set, deque, Counter...)
MUTATORS = frozenset({"append", "appendleft", "extend", "extendleft", "insert", "pop",
                      "popleft", "popitem", "remove", "clear", "update", "setdefault",
                      "add", "discard", "sort", "reverse", "rotate"})
# Globals named as caches: each copy may differ, by design
_PER_COPY = ("cache", "memo")
# What a top-level name bound to a new container is made by
_CONTAINERS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "Counter",
                         "deque", "bytearray"})


@dataclass(frozen=True)
class Change:
    """A function of the module that changes its global ``name`` (at ``line``)."""

    name: str
    function: str
    line: int


def _containers(tree: ast.Module) -> set[str]:
    """Top-level names bound to a new mutable container (``{}``, ``[]``, ``dict()``,
    ``collections.defaultdict(list)``...)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        made = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp
                          | ast.ListComp | ast.SetComp)
        if isinstance(value, ast.Call):
            f = value.func
            made = (f.id if isinstance(f, ast.Name) else
                    f.attr if isinstance(f, ast.Attribute) else "") in _CONTAINERS
        if made:
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names ``fn`` binds itself (parameters, assignments), unless declared global."""
    a = fn.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    names.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
    declared: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names - declared


def _changes(fn: ast.FunctionDef | ast.AsyncFunctionDef, mutable: set[str]) -> Iterator[Change]:
    declared = {n for node in ast.walk(fn) if isinstance(node, ast.Global) for n in node.names}
    own = _locals(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in declared:
            yield Change(node.id, fn.name, node.lineno)  # (global x; x = ...)
            continue
        target: ast.expr | None = None
        if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(
                node.ctx, ast.Store | ast.Del):
            target = node.value  # (x[k] = v, del x[k], x.attr = v)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in MUTATORS):
            target = node.func.value  # (x.append(v), x.update(...))
        if (isinstance(target, ast.Name) and target.id not in own
                and (target.id in mutable or target.id in declared)):
            yield Change(target.id, fn.name, target.lineno)


def global_changes(info: SourceInfo) -> list[Change]:
    """Where the module's top-level functions change its globals, first one per name."""
    try:
        tree = ast.parse(info.path.read_text(encoding="utf-8"), str(info.path))
    except (OSError, SyntaxError, ValueError):
        return []
    mutable = _containers(tree)
    seen: dict[str, Change] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for c in _changes(node, mutable):
                if not any(w in c.name.lower() for w in _PER_COPY):
                    seen.setdefault(c.name, c)
    return sorted(seen.values(), key=lambda c: c.line)


def note_split_state(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                     p: Problems) -> None:
    """A module with more than one replica, or a process pool, whose functions change
    its globals: each process keeps a copy of its own (module docstring)."""
    for key, m in modules.items():
        info = infos.get(key)
        procs = [(name, d) for name, d in m.define.items()
                 if d.pool_kind == "processes" and d.pool > 1]
        if info is None or (len(m.replication) < 2 and not procs):
            continue
        changes = global_changes(info)
        if not changes:
            continue
        c = changes[0]
        more = f" (and {', '.join(repr(x.name) for x in changes[1:4])})" if changes[1:] else ""
        said = (f"module {key!r} ({info.path.name}) keeps state between calls in its global "
                f"{c.name!r}{more}, changed by {c.function}() at line {c.line}")
        if len(m.replication) >= 2:
            p.note(f"{said}, and runs as {len(m.replication)} replicas: each keeps its own "
                   "copy, and calls are not routed by what they touch (a put and a later "
                   "get may reach different replicas)", dotted("modules", key, "replication"),
                   "replication = 1 for a module whose calls share state (put the work that "
                   "needs replicas in a module of its own: docs/strategies.md, 'State in a "
                   "replicated module'); ignore this if each copy may differ (a cache)")
        else:
            name, d = procs[0]
            p.note(f"{said}, and {name} runs in a pool of {d.pool} processes: each keeps its "
                   "own copy", dotted("modules", key, "define", name, "pool"),
                   f"pool = {d.pool} (threads, sharing the replica's globals: guard them with "
                   "a lock) for an interface whose calls share state; ignore this if each "
                   "copy may differ (a cache)")
