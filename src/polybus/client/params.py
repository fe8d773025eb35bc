"""What the client reads of a served function's parameters, from its source (the client
never imports a served module): where a call's arguments land (`parameters`, for
operand caching) and the values a priority expression sees (`priority_fn`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from polybus.client.plan import Signature
from polybus.errors import PriorityError

__all__ = ["parameters", "priority_fn"]


def parameters(source: Path, function: str) -> Signature:
    """A served function's parameters by kind, read from its source (a ``def`` of the
    module, or of another module of the program that it imports the function from):
    where a call's positional arguments and keywords land (operand caching names
    parameters). None known (any other served name): an empty signature."""
    from polybus.config.source import inspect_source

    fn = inspect_source(source, client=False).function(function)
    if fn is None or fn.node is None:
        return Signature((), (), None, None)
    a = fn.node.args
    return Signature(tuple(p.arg for p in (*a.posonlyargs, *a.args)),
                     tuple(p.arg for p in a.kwonlyargs),
                     a.vararg.arg if a.vararg else None,
                     a.kwarg.arg if a.kwarg else None, len(a.posonlyargs))


def _lenient(fn: Any, names: Iterable[str]) -> Callable[..., dict[str, Any]]:
    """For a decorated function, which may take other arguments than it declares: the
    call's positional arguments matched to the declared parameters in order, its
    keywords by name, declared defaults for the rest; nothing refused."""
    from polybus.config.source import defaults

    given = defaults(fn)
    params = list(fn.params)
    names = list(names)

    def bind(*args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = {**given, **dict(zip(params, args, strict=False)), **kwargs}
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"missing argument {missing[0]!r}")
        return {n: bound[n] for n in names}

    bind.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=given.get(n, None))
         for n in names])
    return bind


def priority_fn(expr_source: str, source: Path, function: str,
                key: str | None = None) -> Callable[[tuple[Any, ...], dict[str, Any]], float]:
    """The priority of a call of ``function`` (of the module file ``source``): the
    expression over the call's arguments bound as the function binds them (positional
    or keyword), a parameter the call leaves out taking its default. A call it cannot
    be computed for raises PriorityError naming the interface, the expression and its
    configuration ``key`` (whatever the expression raised on the call's values: it is
    the configuration's mistake, or its mismatch with the call, not the program's)."""
    from polybus.config.expr import compile_priority
    from polybus.config.source import OpaqueDefault, binder, inspect_source

    info = inspect_source(source, client=False)
    fn = info.function(function)
    expr = compile_priority(expr_source, list(fn.params) if fn is not None else [])
    where = f"interface {function!r}: priority {expr_source!r}" + (f" ({key})" if key else "")
    own = f"priority {expr_source!r} "  # (how the expression's own errors begin: expr.py)

    def value(bound: dict[str, Any]) -> float:
        try:
            return expr(bound)
        except Exception as e:  # (whatever the values do under it: len of a float, ...)
            text = str(e)
            if text.startswith(own):  # "gave str 'abc', not a number": said once
                raise PriorityError(f"{where} {text[len(own):]}") from None
            raise PriorityError(f"{where} cannot be computed for this call: "
                                f"{type(e).__name__}: {text}") from None

    if fn is None:  # (an expression of literals only: compile_priority refuses names)
        return lambda args, kwargs: value({})
    lenient = fn.node is not None and bool(fn.node.decorator_list)
    bind = _lenient(fn, expr.names) if lenient else binder(fn, str(info.file_of(fn)),
                                                          expr.names)
    defaults = inspect.signature(bind).parameters
    opaque = [n for n in expr.names if isinstance(defaults[n].default, OpaqueDefault)]

    def prio(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
        try:
            bound = bind(*args, **kwargs)
        except TypeError as e:
            if lenient:  # (the function may take the call; the expression cannot)
                raise PriorityError(f"{where} cannot be computed for this call: {e}"
                                    ) from None
            # The function could not take it either: the call's mistake, said as the
            # replica says it without a priority (worker/replies.py), not the
            # expression's. Still nothing is sent.
            raise PriorityError(f"{e} (the function is {fn.signature})") from None
        for n in opaque:
            if isinstance(bound[n], OpaqueDefault):
                raise PriorityError(
                    f"{where} reads {n!r}, which this call leaves out, and its default "
                    f"{bound[n]!r} is not a literal (the client does not import "
                    f"{source.name}): pass {n} in the call, or give it a literal default")
        return value(bound)

    def reads(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
        """The parameters the expression reads, with this call's values ([] if they
        do not bind): for client/fwdprio.py, which looks for promises among them."""
        try:
            bound = bind(*args, **kwargs)
        except TypeError:
            return []
        return [(n, bound[n]) for n in sorted(expr.names)]

    prio.reads = reads  # type: ignore[attr-defined]
    prio.source = expr_source  # type: ignore[attr-defined]
    return prio
