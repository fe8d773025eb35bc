"""A call of a use()d name that the served function cannot take, found before the run.

``render(t, gian=2.0)`` in the client, ``def render(tile, gain)`` served: the replica
would refuse the call (a TypeError, said at the call by `polybus run`, callsite.py) once
the program got there. The call sites the source shows for certain (config/usecalls.py)
are bound to the served function's parameters here instead, as a stand-in of it would
bind them (source.py `call_signature`): an unknown keyword, a missing required argument,
too many positional ones, one given twice. Each is a mistake of the program, reported
at its file and line with the function's signature and where it is defined. What the
configuration says of a binding (cache, call style, priority) never changes what
arguments the function takes.

The served function may be a ``def`` of another module of the program that the served
module imports (``from helpers import render``: config/boundnames.py); its calls are
checked as a ``def``'s of the module are, at the file and line of its ``def``.

A function whose arguments cannot be known from its def is not checked: a decorated
one, or one whose name the served module binds again (config/usecalls.py
`rebound_functions`). Nor is a served name that no def the source shows binds (a
``functools.partial``, a callable instance, an import from outside the program): a
note says its calls are checked by the replica, as they run. Nor is a binding whose
``use.<name>.check_calls`` is false: the reader cannot know which calls the run makes
(one in a branch the run never takes, or made to see it fail, fits nothing and harms
nothing), so a refusal with no likelier mistake to name (a misspelt keyword's) says how
to leave the binding's calls to fail, if they do, where they run.
"""

from __future__ import annotations

from inspect import Parameter, Signature

from polybus.config.model import Binding, ModuleSpec
from polybus.config.problems import Problems, closest, dotted, nearest
from polybus.config.source import SourceInfo, call_signature
from polybus.config.usecalls import UseCallSite
from polybus.errors import ConfigError

__all__ = ["check_call_arguments"]


def _shown(path: object) -> str:
    from polybus.usercode import shown  # (not at the top: usercode imports config)

    return shown(str(path))


def check_call_arguments(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                         bindings: list[Binding], p: Problems) -> None:
    """Each call site of a bound name in its user's source (``infos``), bound to the
    parameters of the function the binding serves; a mistake for each that does not fit
    (none for a binding whose ``check_calls`` is false), in the order of their files and
    lines (not of the bindings: a call on line 5 was said after one on line 6)."""
    misfits: list[ConfigError] = []
    for b in bindings:
        user, served = infos.get(b.user), infos.get(b.module)
        fn = served.function(b.interface) if served is not None else None
        spec = modules[b.user].use.get(b.name) if b.user in modules else None
        if user is None or served is None or b.interface in served.rebound \
                or (spec is not None and not spec.check_calls):
            continue
        sites = [s for s in user.calls if s.name == b.name]
        if fn is None:
            if sites:
                _note_unchecked(b, user, served, sites, p)
            continue
        defined = served.file_of(fn)
        sig = call_signature(fn, str(defined)) if sites else None
        if sig is None:
            continue
        bound = "" if b.name == b.interface else f" ({b.module}.{b.interface}, bound as {b.name})"
        way_out = "if the run never makes this call as written: " + (
            f"add ': check_calls = false' to module {b.user}'s 'use interface {b.name}' "
            f"statement, or the statement 'use interface {b.name} : check_calls = false ::'"
            if p.mil
            else f"{dotted('modules', b.user, 'use', b.name, 'check_calls')} = false")
        for site in sites:
            error, hint = _misfit(sig, site)
            if error is None:
                continue
            misfits.append(ConfigError(
                f"the call {site.text} does not fit {fn.signature}{bound}, defined at "
                f"{_shown(defined)}:{fn.lineno}: {error}", file=_shown(user.path),
                line=site.lineno, hint=hint or way_out))
    p.errors.extend(sorted(misfits, key=lambda e: (e.file or "", e.line or 0)))


def _note_unchecked(b: Binding, user: SourceInfo, served: SourceInfo,
                    sites: list[UseCallSite], p: Problems) -> None:
    """A note that the calls of ``b.name`` are checked only where they run: what its
    module serves as ``b.interface`` is no def the source shows (a partial, a callable
    instance, a function imported from outside the program)."""
    other = served.others.get(b.interface)
    how = (f"{other.text!r} at {_shown(served.path)}:{other.lineno}"
           if other is not None and other.lineno else f"{_shown(served.path)}")
    lines = list(dict.fromkeys(s.lineno for s in sites))  # (two calls on a line: once)
    where = ", ".join(f"{_shown(user.path)}:{n}" for n in lines[:3]) + (
        ", ..." if len(lines) > 3 else "")
    p.note(f"the calls of {b.name} ({where}) are not checked against its parameters "
           f"before the run: {b.module}.{b.interface} is bound by {how}, not by a def "
           "whose source is read; the replica checks each call as it runs",
           dotted("bind", f"{b.user}.{b.name}"),
           f"to have them checked here, serve a def: def {b.interface}(...): ...; "
           "to say nothing of them, "
           + (f"add ': check_calls = false' to module {b.user}'s 'use interface {b.name}' "
              "statement" if p.mil else
              f"{dotted('modules', b.user, 'use', b.name, 'check_calls')} = false"))


def _misfit(sig: Signature, site: UseCallSite) -> tuple[str | None, str | None]:
    """Why ``site``'s arguments do not bind to ``sig`` (None if they do), and the hint.
    A keyword the function does not take is said first, with the parameter it was
    likely meant to be: a misspelt keyword leaves that parameter missing as well."""
    params = sig.parameters
    if not any(q.kind is q.VAR_KEYWORD for q in params.values()):
        unknown = [k for k in site.keywords if k not in params
                   or params[k].kind in (Parameter.VAR_POSITIONAL, Parameter.VAR_KEYWORD)]
        if unknown:
            taken = set(site.keywords) | set(list(params)[:site.positional])
            free = [n for n, q in params.items() if n not in taken
                    and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
            words = ", ".join(repr(k) for k in unknown)
            near = {k: c for k in unknown if (c := closest(k, free)) is not None}
            hint = (nearest(unknown[0], free) if len(unknown) == 1 else
                    "did you mean " + ", ".join(f"{c!r} for {k!r}" for k, c in near.items())
                    + "?" if near else None)
            said = ("got an unexpected keyword argument" if len(unknown) == 1
                    else "got unexpected keyword arguments")
            return f"{said} {words}", hint
    try:
        sig.bind(*(None,) * site.positional, **dict.fromkeys(site.keywords))
    except TypeError as exc:
        return str(exc), None
    return None, None
