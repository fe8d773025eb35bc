"""``replication = 0``: a module with no replicas, whose interfaces the client calls in
its own process, in the calling thread, as plain Python calls (CORD's ``local``
placement; client/inclient.py makes the calls). It is the sequential baseline a speedup
is measured against: the same module files, the program's work done by the client alone.

Whatever would act on a replica, or on the messages to one, has nothing to act on then:
a queue's order and bound, a pool, an operand cache, a load ratio, aggregation,
forwarding, a transport, a call's timeout. Written for such a module (or for a binding
to it), each is said once, as a warning, and ignored: the same file runs with replicas,
where they apply (`note_in_client`). The other notes (notes.py) look at the rest of the
configuration only (`with_replicas`), so none says the same key twice. `check` says
what 0 does (`in_client_lines`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from polybus.config.model import AppConfig, Binding, ModuleSpec
from polybus.config.problems import Problems, dotted
from polybus.config.units import parse_size
from polybus.errors import ConfigError

__all__ = ["IGNORED", "in_client_lines", "note_in_client", "with_replicas"]

# What each option would act on, which a module called in the client does not have.
IGNORED = {
    # [modules.<key>]
    "transport": "nothing travels: arguments and values are passed as they are",
    "pickle": "nothing is encoded: arguments and values are passed as they are",
    "spin": "no replica's answer is waited for",
    "coalesce": "no replica's answer is waited for",
    "cpus": "its calls run in the client process, which the client module's cpus place",
    # define.<iface>
    "priority": "there is no replica queue to order: each call runs when it is made",
    "pool": "there is no replica pool: each call runs in the calling thread",
    "queue": "there is no replica queue to bound: each call runs when it is made",
    "overflow": "there is no replica queue to fill: each call runs when it is made",
    "cache": "there is no replica to keep operands: arguments are passed as they are",
    "cache_bytes": "there is no replica to keep operands: arguments are passed as they are",
    "prefetch": "there are no replicas to push operands to",
    "timeout": "a call made in the calling thread runs to its end",
    # use.<iface>
    "loadratio": "there are no replicas to share the calls between",
    "balance": "there are no replicas to balance",
    "aggregate": "there are no messages to batch: each call is made at once",
    "linger": "there are no messages to batch: each call is made at once",
    "forward": "no value travels between replicas: every value stays in the client",
}


def _written(table: Any, key: str) -> list[str]:
    """The keys of ``table`` (a raw TOML table) under ``key`` that `IGNORED` names, but
    an ``aggregate`` written off (0, or a size of 0), which asks for nothing."""
    sub = table.get(key) if isinstance(table, dict) else None
    return ([k for k in sub if k in IGNORED and not (k == "aggregate" and _off(sub[k]))]
            if isinstance(sub, dict) else [])


def _off(aggregate: Any) -> bool:
    """``aggregate`` as written is off: 0, or a size of 0 bytes (as schema.py reads it)."""
    if type(aggregate) is int:
        return aggregate == 0
    try:
        return isinstance(aggregate, str) and parse_size(aggregate) == 0
    except ConfigError:  # (not a size: said by the parse, not here)
        return False


def note_in_client(modules: dict[str, ModuleSpec], raw: dict[str, Any],
                   bindings: list[Binding], p: Problems) -> None:
    """A warning for each option written that a module with ``replication = 0`` cannot
    apply: on the module itself, its ``define`` tables, and the ``use`` tables of the
    bindings to it."""
    for key, m in modules.items():
        if not m.in_client or m.entrypoint is not None:
            continue
        table = raw.get(key)
        where = f"module {key!r} has replication = 0 (called in the client)"
        for k in ("transport", "pickle", "spin", "coalesce", "cpus"):
            if isinstance(table, dict) and k in table:
                _say(p, k, where, dotted("modules", key, k), key)
        defines = table.get("define") if isinstance(table, dict) else None
        for iface in defines if isinstance(defines, dict) else ():
            for k in _written(defines, iface):
                _say(p, k, where, dotted("modules", key, "define", iface, k), key)
    for b in bindings:
        target = modules.get(b.module)
        if target is None or not target.in_client:
            continue
        uses = raw.get(b.user, {}).get("use") if isinstance(raw.get(b.user), dict) else None
        where = (f"{b.user}.{b.name} is bound to module {b.module!r}, which has replication "
                 "= 0 (called in the client)")
        for k in _written(uses, b.name):
            _say(p, k, where, dotted("modules", b.user, "use", b.name, k), b.module)


def _say(p: Problems, option: str, where: str, key: str, module: str) -> None:
    # (said instead of what a note made reading the table said of the key: a balance
    # with no effect under async-demand, a priority's default, is moot once ignored)
    p.notes[:] = [n for n in p.notes if n.key != key]
    p.note(f"{option} is ignored: {where}, and {IGNORED[option]}", key,
           f"it applies with replicas, modules.{module}.replication = 1 or more; "
           "leave it out otherwise")


def with_replicas(modules: dict[str, ModuleSpec], bindings: list[Binding]
                  ) -> tuple[dict[str, ModuleSpec], list[Binding]]:
    """The modules and bindings the other notes look at: none of a module with
    ``replication = 0`` (a client's ``use`` of one left out too), whose options
    `note_in_client` says are ignored."""
    local = {k for k, m in modules.items() if m.in_client and m.entrypoint is None}
    if not local:
        return modules, bindings
    names = {(b.user, b.name) for b in bindings if b.module in local}
    kept = {k: dataclasses.replace(m, use={n: u for n, u in m.use.items()
                                           if (k, n) not in names})
            for k, m in modules.items() if k not in local}
    return kept, [b for b in bindings if b.module not in local]


def in_client_lines(app: AppConfig) -> list[str]:
    """What ``replication = 0`` does, a line for each such module that is bound to
    (`polybus check` says them as notes)."""
    lines = []
    for key, m in app.modules.items():
        ifaces = list(dict.fromkeys(b.interface for b in app.bindings if b.module == key))
        if not m.in_client or not ifaces:
            continue
        lines.append(
            f"modules.{key}.replication = 0: no worker process is started for module "
            f"{key!r}; {', '.join(ifaces)} {'is' if len(ifaces) == 1 else 'are'} called in "
            "the client process, in the calling thread, as plain Python calls (the "
            "sequential baseline). Arguments are passed as they are, not copied: a "
            "function that changes an argument in place changes the caller's object, "
            "unlike with replicas")
    return lines
