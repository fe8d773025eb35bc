"""The Comm a binding's configuration asks for (client/operands.py), from its define and
use entries and the signature of the function it calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from polybus.client.naming import known_for
from polybus.client.operands import Comm
from polybus.client.policies.aggregate import Aggregator

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher
    from polybus.client.session import Session
    from polybus.config.model import DefineSpec, UseSpec

__all__ = ["Signature", "comm_for"]


class Signature(NamedTuple):
    """A function's parameters by kind (client/session.py reads them from its source)."""

    positional: tuple[str, ...]   # positional-only and positional-or-keyword, in order
    keyword_only: tuple[str, ...]
    var_positional: str | None    # the name of *args, if any
    var_keyword: str | None       # the name of **kwargs, if any
    positional_only: int = 0      # how many of ``positional`` (the first) are positional-only


def comm_for(session: Session, dispatcher: Dispatcher, use: UseSpec, define: DefineSpec,
             sig: Signature, capacity: int = 0) -> Comm | None:
    """The Comm a binding's configuration asks for, or None (the plain, fastest path).
    ``capacity``: its replicas' operand cache bound (ModuleSpec.cache_bytes), which the
    client follows to know what its Puts evict there (client/held.py).

    A cached parameter is found where a call can put it: a positional one by its
    position or its keyword, a keyword-only one by keyword, ``*args`` as every position
    after the named ones, ``**kwargs`` as every keyword no other parameter takes."""
    cache = define.cache
    if not cache and use.aggregate is None and use.aggregate_bytes is None:
        return None
    positions: set[int] = set()
    names: set[str] = set()
    rest_from: int | None = None
    other_names: frozenset[str] | None = None
    if isinstance(cache, tuple):
        for n in cache:
            if n in sig.positional:
                at = sig.positional.index(n)
                positions.add(at)
                if at >= sig.positional_only:  # (a keyword of a positional-only name
                    names.add(n)               # is not it: it goes to **kwargs)
            elif n == sig.var_positional:
                rest_from = len(sig.positional)
            elif n == sig.var_keyword:
                other_names = frozenset((*sig.positional[sig.positional_only:],
                                         *sig.keyword_only))
            else:
                names.add(n)  # keyword-only (check refuses a name that is no parameter)
    agg = None
    if use.aggregate is not None or use.aggregate_bytes is not None:
        agg = Aggregator(session.reactor, use.aggregate, use.aggregate_bytes, use.linger,
                         session.app.cluster.max_frame)
    return Comm(dispatcher, session.reactor, known_for(session), positions=frozenset(positions),
                names=frozenset(names), rest_from=rest_from, other_names=other_names,
                auto=cache == "auto", prefetch_all=define.prefetch == "all", aggregator=agg,
                cache_bytes=define.cache_bytes if cache else None, capacity=capacity)
