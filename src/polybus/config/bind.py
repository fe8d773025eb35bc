"""From the parsed TOML document to a bound AppConfig: the checks that span tables.

Module sources are read with ``ast`` (never imported) to check entrypoints, defined
interfaces, priority and cache parameters, and the ``use("name")`` calls a module makes;
``[bind]`` is resolved against the interfaces each serving module really has.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from polybus.config.cluster import TLSHosts, parse_cluster
from polybus.config.expr import compile_priority
from polybus.config.keys import DEFINE_KEYS, MODULE_KEYS, USE_KEYS
from polybus.config.model import AppConfig, Binding, ClusterSpec, DefineSpec, ModuleSpec, ServeSpec
from polybus.config.notes import (
    note_big_batches,
    note_idle_shares,
    note_many_replicas,
    note_no_ops,
    note_plain_off_host,
    note_unused,
)
from polybus.config.problems import Problems, closest, dotted, nearest
from polybus.config.schema import TOP_KEYS, is_identifier, parse_module
from polybus.config.serve import check_routes, parse_serve
from polybus.config.source import (
    FunctionInfo,
    OpaqueDefault,
    SourceInfo,
    call_error,
    defaults,
    inspect_source,
    scalar_annotations,
)
from polybus.errors import ConfigError

__all__ = ["build"]


def _names_hint(name: str, choices: list[str], what: str) -> str:
    return nearest(name, choices) or (f"{what}: {', '.join(choices)}" if choices
                                      else f"there are no {what}")


def _sources(modules: dict[str, ModuleSpec], p: Problems) -> dict[str, SourceInfo]:
    infos: dict[str, SourceInfo] = {}
    for m in modules.values():
        if m.source.is_file():
            try:
                infos[m.key] = inspect_source(m.source, client=m.entrypoint is not None)
            except ConfigError as e:
                p.add_error(e, dotted("modules", m.key, "source"))
    return infos


def _check_entrypoint(m: ModuleSpec, info: SourceInfo | None, p: Problems) -> None:
    if (m.entrypoint is None or info is None or m.entrypoint in info.functions
            or not is_identifier(m.entrypoint)):
        return
    p.add(f"entrypoint {m.entrypoint!r} is not a top-level function of {info.path.name}",
          dotted("modules", m.key, "entrypoint"),
          _names_hint(m.entrypoint, list(info.functions), "top-level functions"))


def _check_entry_arguments(m: ModuleSpec, info: SourceInfo | None, p: Problems) -> None:
    """args and kwargs that the entrypoint cannot take (the run failed with a traceback
    from polybus's runner); said with its signature and the nearest parameter name."""
    if info is None or m.entrypoint not in info.functions:
        return
    fn = info.functions[m.entrypoint]
    error = call_error(fn, str(info.path), m.args, m.kwargs)
    if error is None:
        return
    unknown = error.partition("unexpected keyword argument ")[2].strip("'")
    which = "kwargs" if unknown or (m.kwargs and not m.args) else "args"
    key = dotted("modules", m.key, which)
    hint = nearest(unknown, list(fn.params)) if unknown else None
    twice = error.partition("multiple values for argument ")[2].strip("'")
    if twice and p.override(dotted("modules", m.key, "kwargs", twice)) and not p.override(key):
        # The file's args and an override's kwargs (--set, --vary): blamed on the
        # override, which is what changed (it was blamed on the file's args).
        key = dotted("modules", m.key, "kwargs", twice)
        hint = f"{dotted('modules', m.key, 'args')} in {p.file} gives it by position already"
    p.add(f"the entrypoint {fn.signature or fn.name} cannot take these arguments: "
          f"{error}", key, hint)


def _check_define(m: ModuleSpec, info: SourceInfo, p: Problems) -> None:
    functions = list(info.functions)
    for iface, spec in m.define.items():
        key = ("modules", m.key, "define", iface)
        fn: FunctionInfo | None = info.functions.get(iface)
        if fn is None:
            p.add(f"interface {iface!r} is not a top-level function of {info.path.name}",
                  dotted(*key), _names_hint(iface, functions, "top-level functions"))
            continue
        if spec.priority is not None:
            try:
                expr = compile_priority(spec.priority, list(fn.params))
            except ConfigError as e:
                p.add_error(e, dotted(*key, "priority"))
            else:
                for name, default in defaults(fn).items():
                    if name in expr.names and isinstance(default, OpaqueDefault):
                        p.note(f"the priority reads {name!r}, whose default {default!r} is "
                               "not a literal: the client does not import the module, so a "
                               f"call that leaves {name} out fails there",
                               dotted(*key, "priority"),
                               f"pass {name} in every call, or give it a literal default")
        if isinstance(spec.cache, tuple):
            scalars = scalar_annotations(fn)
            for name in spec.cache:
                if name not in fn.params:
                    p.add(f"cache parameter {name!r} is not a parameter of {iface}()",
                          dotted(*key, "cache"),
                          _names_hint(name, list(fn.params), "parameters"))
                elif name in scalars:
                    p.note(f"cache parameter {name!r} of {iface}() is annotated "
                           f"{scalars[name]}, not an array or bytes: only those are sent once "
                           "and then named by content hash, so its argument goes with "
                           "every call by value, as it would uncached (caching it sends "
                           "nothing less)", dotted(*key, "cache"),
                           "cache the array or bytes parameters, or cache = \"auto\" for "
                           "every one of 64 KiB or more")


def _interfaces(m: ModuleSpec, info: SourceInfo | None) -> list[str] | None:
    """What ``m`` serves; None when it cannot be known (its source did not load)."""
    if m.define:
        return list(m.define)
    return None if info is None else info.public()


def _define_all(m: ModuleSpec, info: SourceInfo) -> ModuleSpec:
    """``m``, whose define table only overrides made, serving every public function as a
    module without one does, with the options the overrides gave: ``--set
    modules.server.define.f.cache=...`` configures f, it does not stop the rest."""
    names = [*info.public(), *(n for n in m.define if n in info.functions)]
    # What a replica takes as a whole (its queue's bound, what a full queue does) comes
    # from every entry: the ones filled in carry the named ones', not the defaults, so a
    # --set of define.f.queue = 10 still bounds the queue at 10.
    given = list(m.define.values())
    rest = DefineSpec(queue=max(d.queue for d in given),
                      overflow="reject" if any(d.overflow == "reject" for d in given) else "block")
    return dataclasses.replace(m, define={n: m.define.get(n, rest)
                                          for n in dict.fromkeys(names)})


def _flatten_bind(table: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``"client.compare" = ...`` and ``client.compare = ...`` (a nested table) alike."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.extend(_flatten_bind(v, name))
        else:
            out.append((name, v))
    return out


def _bound_names(raw: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Who uses and who serves which interface by [bind] as written (for hints only:
    the bindings are checked in `_bindings`)."""
    used: dict[str, list[str]] = {}
    served: dict[str, list[str]] = {}
    for left, right in _flatten_bind(raw) if isinstance(raw, dict) else ():
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
    for left, right in _flatten_bind(raw):
        key = dotted("bind", left)
        user, _, name = left.partition(".")
        attempted.add((user, name))
        if not name or not user:
            p.add(f"bad binding name {left!r}", key, "expected \"module.name\" = "
                  "\"servermodule.interface\", e.g. \"client.compare\" = \"server.compare\"")
            continue
        if user not in modules:
            p.add(f"no module {user!r} (the user side of the binding)", key,
                  _names_hint(user, list(modules), "modules"))
        if not isinstance(right, str):
            p.wrong_type("a string \"servermodule.interface\"", right, key)
            continue
        target, _, iface = right.partition(".")
        if not target or not iface:
            p.add(f"bad binding target {right!r}", key,
                  "expected \"servermodule.interface\", e.g. \"server.compare\"")
            continue
        if target not in modules:
            p.add(f"binding target module {target!r} does not exist", key,
                  _names_hint(target, list(modules), "modules"))
            continue
        if not modules[target].replication and not p.reported(
                dotted("modules", target, "replication")):
            p.add(f"binding target module {target!r} has no replicas", key,
                  f"give modules.{target} a replication")
            continue
        served = interfaces.get(target)
        if served is not None and iface not in served:
            if any(p.reported(dotted("modules", target, "define", n)) for n in served):
                continue  # (a misspelt define name, already said: the rest follows from it)
            info = infos.get(target)
            if modules[target].define and info is not None and iface in info.public():
                # The function is there: the define table is what leaves it out.
                table = dotted("modules", target, "define")
                by = p.override(table)  # (an override made the table: blame it)
                p.add(f"module {target!r} does not serve {iface!r}: a module with a define "
                      f"table serves only the interfaces it lists ({', '.join(served)})"
                      + (f"; {key} binds it" if by else ""), table if by else key,
                      by.add_hint(f"{table}.{iface}", "{}") if by
                      else f"add define.{iface} = {{}} to [modules.{target}]")
            else:
                p.add(f"module {target!r} has no interface {iface!r}", key,
                      _names_hint(iface, served, f"interfaces of {target}"))
            continue
        if any(b.user == user and b.name == name for b in result):
            p.add(f"{left!r} is bound twice", key)
            continue
        result.append(Binding(user, name, target, iface))
    return result


def _unbound_hint(user: str, name: str, interfaces: dict[str, list[str] | None],
                  bound: Iterable[str] = ()) -> str:
    servers = [k for k, names in interfaces.items() if names and name in names]
    target = f"{servers[0]}.{name}" if len(servers) == 1 else "<module>.<interface>"
    hint = f'add to [bind]: "{user}.{name}" = "{target}"'
    # A misspelt use('...') next to a binding of the right name: say so first.
    names = sorted(set(bound))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f'did you mean {close[0]!r} (bound in [bind] as "{user}.{close[0]}")? or {hint}'
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
                                    [b.name for b in bindings if b.user == m.key]))
                continue
            replicas = len(modules[b.module].replication)
            if p.reported(dotted("modules", b.module, "replication")):
                continue
            if spec.loadratio is not None and len(spec.loadratio) != replicas:
                p.add(f"the load ratio has {len(spec.loadratio)} shares but module "
                      f"{b.module!r} has {replicas} replica{'' if replicas == 1 else 's'}",
                      dotted(*key, "loadratio"),
                      "give one share per replica, in replica order")
        info = infos.get(m.key)
        reported: set[str] = set(m.use)
        for call in info.uses if info else ():
            if (m.key, call.name) in attempted or call.name in reported:
                continue
            reported.add(call.name)
            p.add(f"unbound interface {call.name!r}: {m.source.name} line {call.lineno} "
                  f"calls use({call.name!r})", dotted("bind", f"{m.key}.{call.name}"),
                  _unbound_hint(m.key, call.name, interfaces,
                                [b.name for b in bindings if b.user == m.key]))


def _extra_entrypoints(clients: list[str], p: Problems) -> list[str]:
    """Of the modules with an entrypoint, the ones to blame: all but the first the file
    gives one (an override's is the mistake, not the file's), or all but the first."""
    from_file = [c for c in clients if p.override(dotted("modules", c, "entrypoint")) is None]
    kept = (from_file or clients)[:1]
    return [c for c in clients if c not in kept]


def _entrypoint_misspelt(tables: dict[str, Any]) -> bool:
    """Whether a module has an unknown key nearest to ``entrypoint`` (``entrypiont``): its
    own error says "did you mean 'entrypoint'?", so no module having one is that mistake,
    not another to report."""
    return any(k not in MODULE_KEYS and k not in USE_KEYS and k not in DEFINE_KEYS
               and closest(k, MODULE_KEYS) == "entrypoint"
               for t in tables.values() if isinstance(t, dict) for k in t)


def build(doc: dict[str, Any], config_path: Path, p: Problems,
          added_define: Iterable[str] = (), tls_hosts: TLSHosts = None,
          running: bool = False) -> AppConfig | None:
    """Validate the parsed (and overridden) document; None when ``p`` holds any mistake.

    ``added_define``: the modules whose define table the overrides made to hold the
    options they set (the file has none, and no override set the table whole); such a
    table adds options to the interfaces it names and leaves the module serving all its
    functions (`_define_all`). ``tls_hosts``: the hosts the [cluster] tls
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
        p.add("no modules", "modules", "add [modules.<name>] tables, each with a source")
    elif modules and not clients and "serve" not in doc and not _entrypoint_misspelt(raw_tables):
        p.add("no module has an entrypoint", "modules",
              'exactly one module (the client) needs entrypoint = "main" or similar, '
              "or a [serve] table routes HTTP requests to the modules")
    for extra in _extra_entrypoints(clients, p):
        p.add(f"several modules have an entrypoint ({', '.join(clients)}); exactly one "
              "(the client) may", dotted("modules", extra, "entrypoint"))
    for m in modules.values():
        if m.entrypoint is not None and not is_identifier(m.entrypoint):
            p.add(f"entrypoint {m.entrypoint!r} is not a function name",
                  dotted("modules", m.key, "entrypoint"))

    infos = _sources(modules, p)
    interfaces: dict[str, list[str] | None] = {}
    for m in list(modules.values()):  # (a define only overrides made is filled in)
        info = infos.get(m.key)
        _check_entrypoint(m, info, p)
        if len(clients) == 1:  # (several entrypoints are one mistake already)
            _check_entry_arguments(m, info, p)
        if info is not None:
            _check_define(m, info, p)
            if m.key in added and m.define:
                m = modules[m.key] = _define_all(m, info)
        interfaces[m.key] = _interfaces(m, info)
    attempted: set[tuple[str, str]] = set()
    bindings = _bindings(doc.get("bind"), modules, interfaces, p, attempted, infos)
    _check_uses(modules, infos, bindings, interfaces, p, attempted)
    note_unused(modules, infos, bindings, p)
    note_no_ops(modules, raw_tables, p, bindings, serve)  # (routes parsed, not checked)
    note_many_replicas(modules, cluster.engine, p)
    note_big_batches(modules, cluster.max_frame, p)
    note_plain_off_host(cluster.listen_host, cluster.tls, p)
    if serve is not None:
        serve = check_routes(serve, modules, interfaces, infos, p)
    note_idle_shares(modules, bindings, serve, p)
    if p or not (clients or serve):
        return None

    for key, m in modules.items():
        changes: dict[str, Any] = {}
        served = interfaces[key]
        if m.replication and not m.define and served:
            changes["define"] = {name: DefineSpec() for name in served}
        named = raw_tables[key].get("replication")
        if cluster.engine == "hosts" and isinstance(named, str) and not (
                named.strip().isascii() and named.strip().isdigit()):
            # "harvey,bugs" under the hosts engine: each replica runs on the host it names
            changes["replication"] = tuple(dataclasses.replace(r, host=r.name)
                                           for r in m.replication)
        if changes:
            modules[key] = dataclasses.replace(m, **changes)
    return AppConfig(path=config_path.resolve(), modules=modules, bindings=tuple(bindings),
                     client=clients[0] if clients else "", cluster=cluster, serve=serve,
                     notes=tuple(p.notes))
