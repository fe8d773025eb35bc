"""A served module's ``use()``: a replica cannot call other modules.

Only the client's session calls the interfaces [bind] binds: it binds the client
module's names alone (client/session.py), and a replica runs its module's functions
with no session of its own. So a binding whose user is a module served by replicas (not
the client) would fail at every call it makes; `check` and `run` refuse it, and report
a ``use("name")`` such a module makes the same way, not as a name to add to [bind]
(`refuse_replica_uses`). A call a replica makes anyway (a name built at run time, or a
client module that has replicas too) fails at the call with the same words
(client/stubs.py). Both say it in `replica_call`, the one place it is written; a
broadcast() a replica makes is told broadcasting is the client's (`replica_broadcast`).

A served module whose source is the client's own file (a Ray-style program, the work
and main() side by side) calls nothing itself: its replicas import the client's use()
calls with the file. Telling it to call both from the client fits nothing it did, so
`_shared_file` says to split the file instead.
"""

from __future__ import annotations

from polybus.config.model import Binding, ModuleSpec
from polybus.config.problems import Problems, dotted
from polybus.config.source import SourceInfo

__all__ = ["refuse_replica_uses", "replica_broadcast", "replica_call"]


def replica_call(module: str, call: str, where: str = "",
                 in_client: bool = False) -> tuple[str, str]:
    """What is wrong when module ``module``'s replicas make ``call`` (``use('f')``;
    ``where``: its file and line, if known), and what to do instead: for a ConfigError's
    message and hint, or joined for a call's UsageError. ``in_client``: the module has
    ``replication = 0`` (called in the client's process, yet not the client module)."""
    at = f" ({where})" if where else ""
    if in_client:
        return (f"module {module!r} has replication = 0 and calls {call}{at}, but a "
                "served module cannot call other modules, in the client's process or "
                "on replicas: only the client (the module with the entrypoint) calls the "
                "interfaces [bind] binds",
                "call both from the client instead, passing the first call's value to "
                "the second")
    return (f"module {module!r} is served by replicas and calls {call}{at}, but a "
            "replica cannot call other modules: only the client (the module with the "
            "entrypoint) calls the interfaces [bind] binds",
            "call both from the client instead, passing the first call's promise to the "
            "second; an async call's promise goes replica to replica, see "
            "docs/strategies.md, forward")


def replica_broadcast(module: str, in_client: bool = False) -> str:
    """The UsageError's message when module ``module``'s replicas call broadcast()
    (``in_client``: its functions, called in the client with ``replication = 0``)."""
    served = "has replication = 0" if in_client else "is served by replicas"
    return (f"module {module!r} {served} and calls polybus.broadcast(), but "
            "only the client (the module with the entrypoint) broadcasts; broadcast the "
            "value from the client and pass the handle to this call, or make the value "
            + ("in the function" if in_client else "on the replica"))


def _served(m: ModuleSpec) -> bool:
    return bool(m.replication or m.in_client) and m.entrypoint is None


def _client_with(m: ModuleSpec, modules: dict[str, ModuleSpec]) -> ModuleSpec | None:
    """The client module whose source file is ``m``'s, if one is."""
    return next((c for c in modules.values() if c.entrypoint is not None
                 and c.source.resolve() == m.source.resolve()), None)


def _shared_file(m: ModuleSpec, client: ModuleSpec, call: str, where: str
                 ) -> tuple[str, str]:
    """`replica_call` for a served module ``m`` in ``client``'s file."""
    served = ("has replication = 0 and its source is" if m.in_client
              else "is served by replicas from")
    who = "it imports" if m.in_client else "its replicas import"
    return (f"module {m.key!r} {served} {m.source.name}, the file of "
            f"the client module {client.key!r}, and so {who} that "
            f"module's {call} ({where}), but {'it' if m.in_client else 'a replica'} "
            "cannot call other modules: only "
            "the client (the module with the entrypoint) calls the interfaces [bind] "
            "binds",
            "put the client's code (the entrypoint and its use() calls) in a file of "
            "its own, and the served functions in another")


def _use_key(m: ModuleSpec, name: str, modules: dict[str, ModuleSpec]) -> tuple[str, str]:
    """`replica_call` for a ``use.<name>`` table in served module ``m``'s own (no use()
    call in its code: the table is likely the client's, put under the wrong module)."""
    served, who = (("has replication = 0", "a served module cannot call other modules, "
                    "in the client's process or on replicas") if m.in_client else
                   ("is served by replicas", "a replica cannot call other modules"))
    client = next((c.key for c in modules.values() if c.entrypoint is not None), None)
    table = f"the client's table, [modules.{client}]" if client else "the client's table"
    return (f"module {m.key!r} {served} and has a use.{name} table, but {who}: only the "
            "client (the module with the entrypoint) calls the interfaces [bind] binds",
            f"a use.{name} table says how the client calls {name}: move it to {table}")


def refuse_replica_uses(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                        bindings: list[Binding], p: Problems,
                        attempted: set[tuple[str, str]]) -> list[Binding]:
    """``bindings`` but those whose user is a served module, each refused; a served
    module's ``use("name")`` calls and ``use.name`` keys are refused as well, and added
    to ``attempted`` (so they are not also reported as unbound names)."""
    kept: list[Binding] = []
    said: set[tuple[str, str]] = set()
    for b in bindings:
        m = modules.get(b.user)
        if m is None or not _served(m):
            kept.append(b)
            continue
        said.add((b.user, b.name))
        info = infos.get(b.user)
        line = next((u.lineno for u in info.uses if u.name == b.name), None) if info else None
        what, instead = replica_call(b.user, f"use({b.name!r})",
                                     f"{m.source.name} line {line}" if line else "",
                                     m.in_client)
        p.add(what, dotted("bind", f"{b.user}.{b.name}"), instead)
    for m in modules.values():
        if not _served(m):
            continue
        info = infos.get(m.key)
        named = [(u.name, f"{m.source.name} line {u.lineno}") for u in info.uses
                 ] if info else []
        named += [(n, "") for n in m.use]
        for name, where in named:
            if (m.key, name) in said or (m.key, name) in attempted:
                continue
            said.add((m.key, name))
            client = _client_with(m, modules) if where else None
            what, instead = (_use_key(m, name, modules) if not where  # (a key, no call)
                             else _shared_file(m, client, f"use({name!r})", where) if client
                             else replica_call(m.key, f"use({name!r})", where, m.in_client))
            p.add(what, dotted("modules", m.key, *(("use", name) if not where
                                                           else ())), instead)
    attempted |= said
    return kept
