"""From the parsed TOML document to a bound AppConfig: the checks that span tables.

Module sources are read with ``ast`` (never imported) to check entrypoints, defined
interfaces, priority and cache parameters (sourcecheck.py), and the ``use("name")`` calls
a module makes; ``[bind]`` is resolved against the interfaces each serving module really
has.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from polybus.config.callargs import check_call_arguments
from polybus.config.cluster import TLSHosts, parse_cluster
from polybus.config.inclient import note_in_client, with_replicas
from polybus.config.keys import DEFINE_KEYS, MODULE_KEYS, USE_KEYS
from polybus.config.methods import method_of
from polybus.config.milfile import MilFile
from polybus.config.model import AppConfig, Binding, ClusterSpec, DefineSpec, ModuleSpec, ServeSpec
from polybus.config.notes import (
    note_big_batches,
    note_demand_batches,
    note_idle,
    note_idle_shares,
    note_many_replicas,
    note_no_ops,
    note_plain_off_host,
    note_unused,
)
from polybus.config.problems import Problems, closest, dotted, names_hint
from polybus.config.registrynames import check_registered_names
from polybus.config.replicause import refuse_replica_uses
from polybus.config.schema import TOP_KEYS, is_identifier, parse_module
from polybus.config.serve import check_routes, parse_serve
from polybus.config.servedkinds import note_unanswerable
from polybus.config.sharedstate import note_split_state
from polybus.config.source import SourceInfo
from polybus.config.sourcecheck import (
    check_define,
    check_entry_arguments,
    check_entrypoint,
    define_all,
    read_sources,
    refusal,
    served_interfaces,
)

__all__ = ["build", "flatten_bind"]


def flatten_bind(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``"client.compare" = ...`` and ``client.compare = ...`` (a nested table) alike."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.extend(flatten_bind(v, name))
        else:
            out.append((name, v))
    return out


def _bound_names(raw: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Who uses and who serves which interface by [bind] as written (for hints only:
    the bindings are checked in `_bindings`)."""
    used: dict[str, list[str]] = {}
    served: dict[str, list[str]] = {}
    for left, right in flatten_bind(raw) if isinstance(raw, dict) else ():
        user, _, name = left.partition(".")
        if name:
            used.setdefault(user, []).append(name)
        target, _, iface = right.partition(".") if isinstance(right, str) else ("", "", "")
        if iface:
            served.setdefault(target, []).append(iface)
    return used, served


def _bindings(raw: Any, modules: dict[str, ModuleSpec],
              interfaces: dict[str, list[str] | None], p: Problems,
              attempted: set[tuple[str, str]],
              infos: dict[str, SourceInfo]) -> list[Binding]:
    """The valid bindings; ``attempted`` gets every (user, name) that [bind] mentions."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        p.wrong_type("a table", raw, "bind")
        return []
    result: list[Binding] = []
    for left, right in flatten_bind(raw):
        key = dotted("bind", left)
        user, _, name = left.partition(".")
        attempted.add((user, name))
        if not name or not user:
            p.add(f"bad binding name {left!r}", key, "expected \"module.name\" = "
                  "\"servermodule.interface\", e.g. \"client.compare\" = \"server.compare\"")
            continue
        if user not in modules:
            message, hint = (p.mil and p.mil.not_instanced(user)) or (
                f"no module {user!r} (the user side of the binding)",
                names_hint(user, list(modules), "modules"))
            p.add(message, key, hint)
        if not isinstance(right, str):
            p.wrong_type("a string \"servermodule.interface\"", right, key)
            continue
        target, _, iface = right.partition(".")
        if not target or not iface:
            p.add(f"bad binding target {right!r}", key,
                  "expected \"servermodule.interface\", e.g. \"server.compare\"")
            continue
        if target not in modules:
            message, hint = (p.mil and p.mil.not_instanced(target)) or (
                f"binding target module {target!r} does not exist",
                names_hint(target, list(modules), "modules"))
            p.add(message, key, hint)
            continue
        if not (modules[target].replication or modules[target].in_client) and not p.reported(
                dotted("modules", target, "replication")):
            if modules[target].entrypoint is not None and user in modules \
                    and (modules[user].replication or modules[user].in_client):
                attempted.add((target, iface))  # (the client's use: not 'unbound' too)
                p.add(f"the binding is written the other way round: {target!r} is the "
                      "program's client (its entrypoint runs it) and serves nothing; "
                      f"{user!r} serves {name!r}", key,
                      f"write 'bind {target} {iface} {user} {name} ::': the caller and the "
                      "name it uses, then the module and interface that serve it" if p.mil
                      else f'write "{target}.{iface}" = "{user}.{name}": the name the '
                      "caller uses (module.name) = the module.interface that serves it")
                continue
            p.add(f"binding target module {target!r} has no replicas", key,
                  f"give modules.{target} a replication")
            continue
        served = interfaces.get(target)
        if served is not None and iface not in served:
            if any(p.reported(dotted("modules", target, "define", n)) for n in served):
                continue  # (a misspelt define name, already said: the rest follows from it)
            info = infos.get(target)
            if modules[target].define and info is not None and info.offers(iface):
                # The function is there: the define table is what leaves it out.
                table = dotted("modules", target, "define")
                by = p.override(table)  # (an override made the table: blame it)
                p.add(f"module {target!r} does not serve {iface!r}: a module with a define "
                      f"table serves only the interfaces it lists ({', '.join(served)})"
                      + (f"; {key} binds it" if by else ""), table if by else key,
                      by.add_hint(f"{table}.{iface}", "{}") if by
                      else _add_define(p, target, iface))
            elif info is not None and (refused := refusal(info, iface)) is not None \
                    and iface in info.others:  # (a module, a literal: said what it is)
                p.add(f"module {target!r} cannot serve {iface!r}: {refused[0]}", key,
                      refused[1])
            elif info is not None and (method := method_of(info, iface)) is not None:
                p.add(f"module {target!r} has no interface {iface!r}: {method[0]}", key,
                      method[1] + f", bound as \"{target}.{iface.rpartition('.')[2]}\" "
                      "(state kept between calls: docs/coming-from.md, 'an actor')")
            else:
                p.add(f"module {target!r} has no interface {iface!r}", key,
                      _interface_hint(iface, served, target, info, p))
            continue
        if any(b.user == user and b.name == name for b in result):
            p.add(f"{left!r} is bound twice", key)
            continue
        result.append(Binding(user, name, target, iface))
    return result


def _interface_hint(iface: str, served: list[str], target: str,
                    info: SourceInfo | None, p: Problems) -> str:
    """The hint for a binding to ``iface``, which ``target`` does not serve: the nearest
    interface it serves, else the nearest function of its file that its define table
    leaves out (bound as it is, that one would be refused for it: the hint says so at
    once), else the interfaces it serves."""
    left_out = [n for n in info.public() if n not in served] if info is not None else []
    near = closest(iface, left_out) if closest(iface, served) is None else None
    if near is None:
        return names_hint(iface, served, f"interfaces of {target}")
    listed = ", ".join(served) or "no interface"
    return (f"did you mean {near!r}? its define table lists only {listed}, not that "
            f"function: {_add_define(p, target, near)}")


def _add_define(p: Problems, target: str, iface: str) -> str:
    """How to have ``target`` serve ``iface``: its define entry (a MIL file's statement)."""
    return (p.mil.add_define(target, iface) if p.mil
            else f"add define.{iface} = {{}} to [modules.{target}]")


def _unbound_hint(user: str, name: str, interfaces: dict[str, list[str] | None],
                  bound: Iterable[str] = (), mil: MilFile | None = None) -> str:
    """How to bind it: the [bind] entry to add, or in a MIL file the bind statement."""
    servers = [k for k, names in interfaces.items() if names and name in names]
    target = f"{servers[0]}.{name}" if len(servers) == 1 else None
    hint = (mil.add_bind(user, name, target) if mil else
            f'add to [bind]: "{user}.{name}" = "{target or "<module>.<interface>"}"')
    # A misspelt use('...') next to a binding of the right name: say so first.
    names = sorted(set(bound))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        bound_as = (mil.bound_as(user, close[0]) if mil
                    else f'bound in [bind] as "{user}.{close[0]}"')
        return f"did you mean {close[0]!r} ({bound_as})? or {hint}"
    if names and len(names) <= 6:  # (no name near it: the ones there are, for a `use.f`)
        return f"{user}'s bound names: {', '.join(names)}; or {hint}"
    return hint


def _check_uses(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                bindings: list[Binding], interfaces: dict[str, list[str] | None],
                p: Problems, attempted: set[tuple[str, str]]) -> None:
    """Every used name must be bound (a [bind] entry that was wrong is reported already)."""
    bound = {(b.user, b.name): b for b in bindings}
    for m in modules.values():
        for name, spec in m.use.items():
            key = ("modules", m.key, "use", name)
            b = bound.get((m.key, name))
            if b is None and (m.key, name) in attempted:
                continue
            if b is None:
                p.add(f"unbound interface {name!r}", dotted(*key),
                      _unbound_hint(m.key, name, interfaces,
                                    [b.name for b in bindings if b.user == m.key], p.mil))
                continue
            replicas = len(modules[b.module].replication)
            if p.reported(dotted("modules", b.module, "replication")) \
                    or modules[b.module].in_client:  # (its options ignored: inclient.py)
                continue
            if spec.loadratio is not None and len(spec.loadratio) != replicas:
                p.add(f"the load ratio has {len(spec.loadratio)} shares but module "
                      f"{b.module!r} has {replicas} replica{'' if replicas == 1 else 's'}",
                      dotted(*key, "loadratio"),
                      "give one share per replica, in replica order")
            if spec.forward == "keep" and modules[b.module].migration:
                p.add(f"forward = \"keep\" is for plain async calls, and module {b.module!r} "
                      "has migration paths, which may move a call to another replica",
                      dotted(*key, "forward"), "use forward = true on this binding")
            elif spec.forward == "keep":
                _refuse_keep_beside_steal(m, name, b.module, bound, p)
        info = infos.get(m.key)
        reported: set[str] = set(m.use)
        for call in info.uses if info else ():
            if (m.key, call.name) in attempted or call.name in reported:
                continue
            reported.add(call.name)
            p.add(f"unbound interface {call.name!r}: {m.source.name} line {call.lineno} "
                  f"calls use({call.name!r})", dotted("bind", f"{m.key}.{call.name}"),
                  _unbound_hint(m.key, call.name, interfaces,
                                [b.name for b in bindings if b.user == m.key], p.mil))


def _refuse_keep_beside_steal(m: ModuleSpec, name: str, target: str,
                              bound: dict[tuple[str, str], Binding], p: Problems) -> None:
    """``m``'s ``use.<name>.forward = "keep"``, bound to module ``target``, beside another
    of ``m``'s bindings to ``target`` with ``balance = "steal"``: ``m`` has one link per
    replica of ``target``, shared by its bindings, and a Steal takes any calls queued on
    it, so the keep binding's calls would move too."""
    for other, spec in m.use.items():
        b = bound.get((m.key, other))
        if other != name and b is not None and b.module == target and spec.balance == "steal":
            p.add(f"forward = \"keep\" is for plain async calls, and {m.key}.{other}, bound "
                  f"to module {target!r} as {m.key}.{name} is, has balance = \"steal\", "
                  "which may move this binding's calls to another replica too",
                  dotted("modules", m.key, "use", name, "forward"),
                  f"use forward = true on this binding, or another balance on {m.key}.{other}")
            return


def _extra_entrypoints(clients: list[str], p: Problems) -> list[str]:
    """Of the modules with an entrypoint, the ones to blame: all but the first the file
    gives one (an override's is the mistake, not the file's), or all but the first."""
    from_file = [c for c in clients if p.override(dotted("modules", c, "entrypoint")) is None]
    kept = (from_file or clients)[:1]
    return [c for c in clients if c not in kept]


def _entrypoint_mistaken(tables: dict[str, Any]) -> bool:
    """Whether a module has an unknown key nearest to ``entrypoint`` (``entrypiont``), or
    an entrypoint that is not a string (``entrypoint = 7``): its own error says "did you
    mean 'entrypoint'?" or "expected a string", so no module having one is that mistake,
    not another to report."""
    return any((k == "entrypoint" and not isinstance(v, str)) or (
               k not in MODULE_KEYS and k not in USE_KEYS and k not in DEFINE_KEYS
               and closest(k, MODULE_KEYS) == "entrypoint")
               for t in tables.values() if isinstance(t, dict) for k, v in t.items())


def build(doc: dict[str, Any], config_path: Path, p: Problems,
          added_define: Iterable[str] = (), tls_hosts: TLSHosts = None,
          running: bool = False) -> AppConfig | None:
    """Validate the parsed (and overridden) document; None when ``p`` holds any mistake.

    ``added_define``: the modules whose define table the overrides made to hold the
    options they set (the file has none, and no override set the table whole); such a
    table adds options to the interfaces it names and leaves the module serving all its
    functions (`define_all`). ``tls_hosts``: the hosts the [cluster] tls
    certificate must name, and ``running`` whether the hosts engine needs its registry
    here (config/cluster.py)."""
    added = set(added_define)
    base_dir = config_path.resolve().parent
    p.unknown_keys(doc, TOP_KEYS)
    raw_modules = doc.get("modules")
    modules: dict[str, ModuleSpec] = {}
    if raw_modules is None:
        p.add("missing table [modules]", "modules", "e.g. [modules.server] with a source")
    elif not isinstance(raw_modules, dict):
        p.wrong_type("a table", raw_modules, "modules")
    raw_tables: dict[str, Any] = raw_modules if isinstance(raw_modules, dict) else {}
    uses, serves = _bound_names(doc.get("bind"))
    for key, table in raw_tables.items():
        if isinstance(table, dict):
            modules[key] = parse_module(key, table, base_dir, p, uses.get(key, ()),
                                        serves.get(key, ()))
        else:
            p.wrong_type("a table", table, dotted("modules", key))
    cluster = ClusterSpec()
    if "cluster" in doc:
        if isinstance(doc["cluster"], dict):
            cluster = parse_cluster(doc["cluster"], base_dir, p, tls_hosts, running)
        else:
            p.wrong_type("a table", doc["cluster"], "cluster")
    serve: ServeSpec | None = None
    if "serve" in doc:
        if isinstance(doc["serve"], dict):
            serve = parse_serve(doc["serve"], p)
        else:
            p.wrong_type("a table", doc["serve"], "serve")

    clients = [m.key for m in modules.values() if m.entrypoint is not None]
    if isinstance(raw_modules, dict) and not raw_modules:
        p.add("no modules", "modules", MilFile.ADD_MODULES if p.mil
              else "add [modules.<name>] tables, each with a source")
    elif modules and not clients and "serve" not in doc and not _entrypoint_mistaken(raw_tables):
        p.add("no module has an entrypoint", "modules", MilFile.ADD_ENTRYPOINT if p.mil else
              'exactly one module (the client) needs entrypoint = "main" or similar, '
              "or a [serve] table routes HTTP requests to the modules")
    for extra in _extra_entrypoints(clients, p):
        p.add(f"several modules have an entrypoint ({', '.join(clients)}); exactly one "
              "(the client) may", dotted("modules", extra, "entrypoint"))
    for m in modules.values():
        if m.entrypoint is not None and not is_identifier(m.entrypoint):
            p.add(f"entrypoint {m.entrypoint!r} is not a function name",
                  dotted("modules", m.key, "entrypoint"))

    infos = read_sources(modules, p)
    interfaces: dict[str, list[str] | None] = {}
    for m in list(modules.values()):  # (a define only overrides made is filled in)
        info = infos.get(m.key)
        check_entrypoint(m, info, p)
        if len(clients) == 1:  # (several entrypoints are one mistake already)
            check_entry_arguments(m, info, p)
        if info is not None:
            check_define(m, info, p)
        routed = [r.interface for r in serve.routes if r.module == m.key] if serve else []
        named = [*serves.get(m.key, ()), *routed]
        if info is not None and m.key in added and m.define:
            m = modules[m.key] = define_all(m, info, named)
        interfaces[m.key] = served_interfaces(m, info, named)
    attempted: set[tuple[str, str]] = set()
    bindings = _bindings(doc.get("bind"), modules, interfaces, p, attempted, infos)
    if clients or serve is not None:  # (none: a misspelt entrypoint makes the client look served)
        bindings = refuse_replica_uses(modules, infos, bindings, p, attempted)
    _check_uses(modules, infos, bindings, interfaces, p, attempted)
    check_call_arguments(modules, infos, bindings, p)
    note_unused(modules, infos, bindings, p)
    note_in_client(modules, raw_tables, bindings, p)  # (replication = 0: ignored options)
    remote, far = with_replicas(modules, bindings)  # (the rest, for the notes below)
    note_no_ops(remote, raw_tables, p, far, serve)  # (routes parsed, not checked)
    note_many_replicas(modules, cluster.engine, p)
    note_split_state(remote, infos, p)  # (a replicated module's globals changed by calls)
    note_big_batches(remote, cluster.max_frame, p)
    note_plain_off_host(cluster.listen_host, cluster.tls, p)
    if serve is not None:
        serve = check_routes(serve, modules, interfaces, infos, p)
    note_idle(modules, bindings, serve, p)  # (replicas that serve no call)
    note_unanswerable(modules, infos, bindings, serve, p)  # (a generator, an async def)
    check_registered_names(modules, interfaces, serve, p)
    note_idle_shares(remote, far, serve, p)
    note_demand_batches(remote, far, p)
    if p or not (clients or serve):
        return None

    for key, m in modules.items():
        changes: dict[str, Any] = {}
        served = interfaces[key]
        if (m.replication or m.in_client) and not m.define and served:
            changes["define"] = {name: DefineSpec(filled=True) for name in served}
        if cluster.engine == "hosts" and m.named:
            # "harvey,bugs" under the hosts engine: each replica runs on the host it names
            changes["replication"] = tuple(dataclasses.replace(r, host=r.name)
                                           for r in m.replication)
        if changes:
            modules[key] = dataclasses.replace(m, **changes)
    return AppConfig(path=config_path.resolve(), modules=modules, bindings=tuple(bindings),
                     client=clients[0] if clients else "", cluster=cluster, serve=serve,
                     notes=tuple(p.notes))
