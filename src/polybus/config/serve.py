"""``[serve]``: the HTTP front door's table, parsed and checked against the modules.

Routes read like ``[bind]``: the left side is what the front door is asked for
(``"GET /api"``), the right the serving module and interface (``"web.api"``), or a
table with ``to`` and the options of a ``use`` binding (callstyle, timeout, ...).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from polybus.config.keys import SERVE_KEYS
from polybus.config.model import CallStyle, ModuleSpec, RouteSpec, ServeSpec, UseSpec
from polybus.config.problems import Problems, dotted, nearest
from polybus.config.schema import USE_KEYS, parse_use
from polybus.config.source import SourceInfo
from polybus.config.table import Table
from polybus.config.units import parse_duration, parse_size
from polybus.http.response import REQUEST_FIELDS
from polybus.http.routes import split_route_key

__all__ = ["HTTP_METHODS", "ROUTE_KEYS", "SERVE_KEYS", "check_routes", "parse_serve"]

ROUTE_KEYS = ("to", "callstyle", "loadratio", "balance", "timeout", "transport")
#: the methods of RFC 9110 and PATCH: a route's method outside them is taken for a typo
#: ("GTE /" would otherwise answer every GET with 405)
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
_ROUTE_FORMS = ('"module.interface", or a table such as '
                '{ to = "web.api", callstyle = "async-demand(4)", timeout = "2s" }')


def _route(key: str, raw: Any, p: Problems) -> RouteSpec | None:
    path = ("serve", "routes", key)
    try:
        method, route_path = split_route_key(key)
    except ValueError as e:
        near = nearest(key, SERVE_KEYS) if "/" not in key else None
        hint = (f"{near[:-1]} of [serve]? it is under [serve.routes] here" if near else
                'e.g. "GET /", "POST /api" or "/files/*" (a prefix)')
        p.add(f"bad route {key!r}: {e}", dotted(*path), hint)
        return None
    if method is not None and method not in HTTP_METHODS:
        p.add(f"bad route {key!r}: unknown HTTP method {method!r}", dotted(*path),
              nearest(method, HTTP_METHODS) or f"one of {', '.join(HTTP_METHODS)}")
        return None
    # A route's requests go each to the least loaded replica unless it says otherwise
    # (a handler holding the GIL for a while would otherwise get every other request
    # while another replica idles) or splits them by loadratio.
    use = UseSpec(CallStyle("async"), balance="least")
    if isinstance(raw, dict):
        p.unknown_keys(raw, ROUTE_KEYS, *path)
        # (a use option a route does not take, forward say, is only unknown: parsed, it
        # would be checked against the route's callstyle as well)
        options = {k: v for k, v in raw.items() if k in USE_KEYS and k in ROUTE_KEYS}
        if options:
            use = parse_use(options, path, p)
            if "callstyle" not in options:
                use = dataclasses.replace(use, callstyle=CallStyle("async"))
            if "balance" not in options and "loadratio" not in options \
                    and use.callstyle.kind == "async":
                use = dataclasses.replace(use, balance="least")
        target = raw.get("to")
        if target is None:
            p.add("a route table needs 'to'", dotted(*path), _ROUTE_FORMS)
            return None
    else:
        target = raw
    key_of_target = dotted(*path, "to") if isinstance(raw, dict) else dotted(*path)
    if not isinstance(target, str):
        p.wrong_type(_ROUTE_FORMS, target, key_of_target)
        return None
    module, _, iface = target.partition(".")
    if not module or not iface:
        p.add(f"bad route target {target!r}", key_of_target,
              'expected "module.interface", e.g. "web.page"')
        return None
    return RouteSpec(key, method, route_path, module, iface, use)


def parse_serve(table: dict[str, Any], p: Problems) -> ServeSpec:
    p.unknown_keys(table, SERVE_KEYS, "serve")
    t = Table(table, ("serve",), p)
    d = ServeSpec()
    listen = t.address("listen", "listen", "expected HOST:PORT, e.g. '127.0.0.1:8080' "
                       "(port 0: any free port; '0.0.0.0:8080' serves every interface)",
                       lowest_port=0)
    routes: list[RouteSpec] = []
    seen: dict[tuple[str | None, str], str] = {}
    for key, raw in (t.table("routes") or {}).items():
        r = _route(key, raw, p)
        if r is None:
            continue
        if (r.method, r.path) in seen:
            p.add(f"route {key!r} is the same as {seen[(r.method, r.path)]!r}",
                  dotted("serve", "routes", key))
            continue
        seen[(r.method, r.path)] = key
        routes.append(r)
    if "routes" not in table or table["routes"] == {}:  # (empty: every request a 404)
        p.add("[serve] needs routes" + (": its routes table is empty, so every request "
                                        "would be answered 404" if "routes" in table else ""),
              t.key("routes"), '[serve.routes] with e.g. "GET /" = "web.page"')
    sizes = {k: t.parsed(k, parse_size) for k in ("max_body", "max_head", "min_body_rate")}
    if sizes["max_head"] is not None and sizes["max_head"] < 1024:
        p.add("expected at least 1KiB", t.key("max_head"))
        sizes["max_head"] = None
    if sizes["min_body_rate"] == 0:  # (bytes a second; none would let a body trickle on)
        p.add("expected at least 1 (bytes a second), got 0", t.key("min_body_rate"),
              'e.g. "1KiB"')
    return ServeSpec(
        listen=listen or d.listen,
        routes=tuple(routes),
        max_body=d.max_body if sizes["max_body"] is None else sizes["max_body"],
        max_head=sizes["max_head"] or d.max_head,
        max_connections=t.integer("max_connections", 1) or d.max_connections,
        idle_timeout=t.positive_duration("idle_timeout") or d.idle_timeout,
        head_timeout=t.positive_duration("head_timeout") or d.head_timeout,
        min_body_rate=sizes["min_body_rate"] or d.min_body_rate,
        tracebacks=bool(t.boolean("tracebacks")),
        grace=d.grace if (grace := t.parsed("grace", parse_duration)) is None else grace,
        restart=d.restart if (restart := t.boolean("restart")) is None else restart,
        # (no longer than the longest pause it doubles up to: engines/supervise.py)
        restart_pause=t.positive_duration("restart_pause", (30.0, "30s"))
        or d.restart_pause,
    )


def _fields(r: RouteSpec, info: SourceInfo | None, p: Problems) -> tuple[str, ...]:
    """The request fields the handler names; each of its parameters must be one."""
    fn = info.function(r.interface) if info else None
    key = dotted("serve", "routes", r.key)
    if fn is None:
        if info is not None and info.servable(r.interface):
            # (a partial, a callable instance: which fields to pass is not known)
            other = info.others.get(r.interface)
            how = f" ({other.text}, line {other.lineno})" if other and other.lineno else ""
            p.add(f"handler {r.interface!r} is no def that {info.path.name} shows{how}: "
                  "a route passes a handler the request fields its def's parameters "
                  "name", key, f"serve a def: def {r.interface}(body): return ...(body)")
        return REQUEST_FIELDS
    for name in fn.required:
        if name not in REQUEST_FIELDS:
            p.add(f"handler {r.interface}() has a parameter {name!r} that a request cannot "
                  "fill", key, nearest(name, REQUEST_FIELDS)
                  or f"a handler takes any of {', '.join(REQUEST_FIELDS)} (by name)")
    for name in fn.positional_only:
        if name in REQUEST_FIELDS:
            p.add(f"handler {r.interface}() takes {name!r} positional-only; request fields "
                  "are passed by name", key)
    if fn.var_keyword:
        return REQUEST_FIELDS
    return tuple(f for f in REQUEST_FIELDS if f in fn.params)


def _not_served(r: RouteSpec, key: str, m: ModuleSpec, served: list[str],
                info: SourceInfo | None, p: Problems) -> None:
    """A route to an interface the module does not serve, said as a [bind] entry to it
    is: a function of its file that its define table leaves out is told the define
    entry that serves it, a near miss the name meant (config/bind.py)."""
    # (bind.py imports this module: its hints are imported when one is needed)
    from polybus.config.bind import _add_define, _interface_hint

    if any(p.reported(dotted("modules", r.module, "define", n)) for n in served):
        return  # (a misspelt define name, already said: the rest follows from it)
    if info is not None and m.define and info.offers(r.interface):
        table = dotted("modules", r.module, "define")
        by = p.override(table)  # (an override made the table: blame it)
        p.add(f"module {r.module!r} does not serve {r.interface!r}: a module with a define "
              f"table serves only the interfaces it lists ({', '.join(served)})"
              + (f"; {key} routes it" if by else ""), table if by else key,
              by.add_hint(f"{table}.{r.interface}", "{}") if by
              else _add_define(p, r.module, r.interface))
    else:
        p.add(f"module {r.module!r} has no interface {r.interface!r}", key,
              _interface_hint(r.interface, served, r.module, info, p))


def check_routes(serve: ServeSpec, modules: dict[str, ModuleSpec],
                 interfaces: dict[str, list[str] | None], infos: dict[str, SourceInfo],
                 p: Problems) -> ServeSpec:
    """Targets exist and have replicas; handlers take only request fields."""
    routes = []
    for r in serve.routes:
        key = dotted("serve", "routes", r.key)
        if r.module not in modules:
            p.add(f"route target module {r.module!r} does not exist", key,
                  nearest(r.module, modules) or f"modules: {', '.join(modules)}")
            continue
        if modules[r.module].in_client:
            # (the front door answers many requests at once from one event loop: a call
            # made in its process would stop every other request while it ran)
            p.add(f"route target module {r.module!r} has replication = 0 (called in the "
                  "client's process), but `polybus serve` answers routes from replicas",
                  key, f"give modules.{r.module} a replication of 1 or more")
            continue
        if not modules[r.module].replication:
            p.add(f"route target module {r.module!r} has no replicas", key,
                  f"give modules.{r.module} a replication")
            continue
        served = interfaces.get(r.module)
        if served is not None and r.interface not in served:
            _not_served(r, key, modules[r.module], served, infos.get(r.module), p)
            continue
        n = len(modules[r.module].replication)
        if r.use.loadratio is not None and len(r.use.loadratio) != n:
            p.add(f"the load ratio has {len(r.use.loadratio)} shares but module "
                  f"{r.module!r} has {n} replica{'' if n == 1 else 's'}",
                  dotted("serve", "routes", r.key, "loadratio"))
        routes.append(dataclasses.replace(r, fields=_fields(r, infos.get(r.module), p)))
    return dataclasses.replace(serve, routes=tuple(routes))
