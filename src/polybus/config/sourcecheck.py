"""Each module's table checked against its source, read with ``ast`` (source.py), never
imported: its entrypoint and the arguments given to it, and each interface it defines
(a top-level function; the parameters its priority reads and its cache names); and
what the module serves. bind.py's `build` runs these on every module before it
resolves ``[bind]`` against the interfaces found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from polybus.config.expr import compile_priority
from polybus.config.model import DefineSpec, ModuleSpec
from polybus.config.problems import Problems, dotted, names_hint, nearest
from polybus.config.schema import is_identifier
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

__all__ = ["check_define", "check_entry_arguments", "check_entrypoint", "define_all",
           "read_sources", "refusal", "served_interfaces"]


def read_sources(modules: dict[str, ModuleSpec], p: Problems) -> dict[str, SourceInfo]:
    infos: dict[str, SourceInfo] = {}
    for m in modules.values():
        if m.source.is_file():
            try:
                infos[m.key] = inspect_source(m.source, client=m.entrypoint is not None)
            except ConfigError as e:
                p.add_error(e, dotted("modules", m.key, "source"))
    return infos


def check_entrypoint(m: ModuleSpec, info: SourceInfo | None, p: Problems) -> None:
    if (m.entrypoint is None or info is None or m.entrypoint in info.functions
            or not is_identifier(m.entrypoint)):
        return
    p.add(f"entrypoint {m.entrypoint!r} is not a top-level function of {info.path.name}",
          dotted("modules", m.key, "entrypoint"),
          names_hint(m.entrypoint, list(info.functions), "top-level functions"))


def check_entry_arguments(m: ModuleSpec, info: SourceInfo | None, p: Problems) -> None:
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


def refusal(info: SourceInfo, iface: str) -> tuple[str, str] | None:
    """Why ``iface`` cannot be served from ``info``'s module, and the hint; None when it
    may be (`SourceInfo.servable`)."""
    if info.servable(iface):
        return None
    other = info.others.get(iface)
    if other is None:
        return (f"interface {iface!r} is not a top-level function of {info.path.name}",
                names_hint(iface, list(info.functions), "top-level functions"))
    return (f"interface {iface!r} is {other.kind}, not a function: "
            f"{info.path.name}:{other.lineno} binds it ({other.text})",
            f"a replica serves a function (or another callable): define one in "
            f"{info.path.name} that does what {iface} should, e.g. def {iface}(...): ...")


def _unread(iface: str, info: SourceInfo, what: str) -> str:
    """Why ``what`` (a priority or cache parameters) cannot be read for ``iface``,
    served from ``info``'s module but no ``def`` the source shows."""
    other = info.others.get(iface)
    how = (f"{info.path.name}:{other.lineno} binds it by {other.text!r}, not by a def"
           if other is not None and other.lineno else
           f"{info.path.name} binds it other than by a def")
    return (f"{what} of interface {iface!r} cannot be read from the source: {how} (the "
            "client does not import the module, so it knows a function's parameters "
            "only from a def of the program)")


def _check_unread(m: ModuleSpec, iface: str, spec: DefineSpec, info: SourceInfo,
                  p: Problems) -> None:
    """A served name with no def the source shows (a partial, a callable instance, an
    import from outside the program): its priority may not read, nor its cache name,
    a parameter."""
    key = ("modules", m.key, "define", iface)
    wrap = f"serve a def instead: def {iface}(x, ...): return <it>(x, ...) in {info.path.name}"
    if spec.priority is not None:
        try:
            compile_priority(spec.priority, [])
        except ConfigError:
            p.add(_unread(iface, info, f"the parameters priority {spec.priority!r} reads"),
                  dotted(*key, "priority"), wrap)
    if isinstance(spec.cache, tuple) and spec.cache:
        p.add(_unread(iface, info, "the cache parameters"), dotted(*key, "cache"),
              f'{wrap}; or cache = "auto", which needs no names')


def check_define(m: ModuleSpec, info: SourceInfo, p: Problems) -> None:
    for iface, spec in m.define.items():
        key = ("modules", m.key, "define", iface)
        fn: FunctionInfo | None = info.function(iface)
        if fn is None:
            refused = refusal(info, iface)
            if refused is not None:
                p.add(refused[0], dotted(*key), refused[1])
            else:
                _check_unread(m, iface, spec, info, p)
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
                          names_hint(name, list(fn.params), "parameters"))
                elif name in scalars:
                    p.note(f"cache parameter {name!r} of {iface}() is annotated "
                           f"{scalars[name]}, not an array or bytes: only those are sent once "
                           "and then named by content hash, so its argument goes with "
                           "every call by value, as it would uncached (caching it sends "
                           "nothing less)", dotted(*key, "cache"),
                           "cache the array or bytes parameters, or cache = \"auto\" for "
                           "every one of 64 KiB or more")


def served_interfaces(m: ModuleSpec, info: SourceInfo | None,
                      named: Iterable[str] = (), *, table: bool = True) -> list[str] | None:
    """What ``m`` serves; None when it cannot be known (its source did not load).
    Without a define table: its public functions, and those of the names ``named`` (by
    [bind] and [serve] routes) that it binds otherwise and may serve (an imported
    function, a callable instance: `SourceInfo.servable`); its other imports are not
    its interfaces unless something names them. ``table=False``: as if it had none."""
    if m.define and table:
        return list(m.define)
    if info is None:
        return None
    public = info.public()
    return [*public, *dict.fromkeys(n for n in named if not n.startswith("_")
                                    and n not in info.functions and info.servable(n))]


def define_all(m: ModuleSpec, info: SourceInfo, named: Iterable[str] = ()) -> ModuleSpec:
    """``m``, whose define table only overrides made, serving every public function as a
    module without one does, with the options the overrides gave: ``--set
    modules.server.define.f.cache=...`` configures f, it does not stop the rest. ``named``
    as for `served_interfaces`: the names [bind] and [serve] routes give it, which it
    serves without a define table when it binds them otherwise (`get = counter.get`)."""
    names = [*(served_interfaces(m, info, named, table=False) or ()),
             *(n for n in m.define if info.servable(n))]
    # What a replica takes as a whole (its queue's bound, what a full queue does) comes
    # from every entry: the ones filled in carry the named ones', not the defaults, so a
    # --set of define.f.queue = 10 still bounds the queue at 10.
    given = list(m.define.values())
    rest = DefineSpec(queue=max(d.queue for d in given),
                      overflow="reject" if any(d.overflow == "reject" for d in given) else "block",
                      filled=True)
    return dataclasses.replace(m, define={n: m.define.get(n, rest)
                                          for n in dict.fromkeys(names)})
