"""The promise of an overlapped call made in the client (``replication = 0``,
client/inclient.py): answered when the call was made (`DonePromise`).

Passed to another overlapped call, one that failed fails that call's promise, not the
call (`upstream_failure`), as a replica's failed call fails its consumer whose value
it was to be (client/upstream.py): the consumer's promise raises where it is used, a
RemoteException of the producer's type whose message begins "an upstream call failed:
" and says where it was raised. (Its value was taken at the consumer's call, so the
consumer raised there instead: a program's ``try`` around its ``wait`` caught it with
replicas, and not with ``replication = 0``.) A sync consumer waits for its arguments
at the call, and raises the producer's error there, as with replicas; so does any
consumer of a failed promise whose error the program has already had raised
(unseen.raised_before): an answered failed promise, which a replica's consumer raises
at its call too.
"""

from __future__ import annotations

from typing import Any

from polybus.client.calltext import call_text
from polybus.client.promise import Promise
from polybus.client.unseen import failed, forgotten, raised, raised_before
from polybus.client.upstream import consumer_error, origin, upstream_of
from polybus.errors import PolybusError

__all__ = ["DonePromise", "consumer_failure", "upstream_failure"]


class DonePromise(Promise):
    """The promise of an overlapped call made in the client: answered when it was made,
    with its value or its error (raised where the promise is used)."""

    __slots__ = ("_error", "_interface", "_value")
    _error: PolybusError | None
    _interface: str
    _value: Any

    def __init__(self, value: Any, error: PolybusError | None, interface: str) -> None:
        object.__setattr__(self, "_value", value)  # (Promise's own sets its value's)
        object.__setattr__(self, "_error", error)
        object.__setattr__(self, "_interface", interface)

    def __polybus_value__(self) -> Any:
        error = self._error
        if error is not None:
            raise raised(error)
        return self._value

    @property
    def done(self) -> bool:
        return True

    @property
    def _answered(self) -> bool:
        return True

    def __del__(self) -> None:
        if self._error is not None:  # (never used: said, as a replica's failure is)
            forgotten(self._error, self._interface)


class _Earlier:
    """An argument that was an earlier call's promise, in a call's text."""

    def __repr__(self) -> str:
        return "<an earlier call's value>"


_EARLIER = _Earlier()


def _failed_in(args: tuple[Any, ...], kwargs: dict[str, Any]) -> DonePromise | None:
    """A failed `DonePromise` of ``args`` or ``kwargs`` whose failure the program has not
    seen come out; None if none. (One it has is an answered failed promise, which a
    call raises at once, its value taken, as for a replica's.)"""
    for a in args:
        if type(a) is DonePromise and a._error is not None and not raised_before(a._error):
            return a
    if kwargs:
        for v in kwargs.values():
            if type(v) is DonePromise and v._error is not None \
                    and not raised_before(v._error):
                return v
    return None


def upstream_failure(interface: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> DonePromise | None:
    """The promise of an overlapped call to ``interface`` whose arguments hold a failed
    `DonePromise` (one of them itself, not one inside a list: as for a replica's promise,
    client/awaiting.py), failed as its consumer; None when none failed."""
    p = _failed_in(args, kwargs)
    if p is None:
        return None
    assert p._error is not None
    return consumer_failure(interface, p, p._error, args, kwargs)


def _origin(p: Promise, error: PolybusError) -> str:
    """Where producer ``p``'s ``error`` was raised: "f" in the client, "f on server-0"
    on a replica (client/upstream.py), "" when its kind does not say."""
    if type(p) is DonePromise:
        return upstream_of(error, p._interface)
    from polybus.client.batchcalls import BatchPromise
    from polybus.client.promise import CallPromise

    if type(p) is CallPromise or type(p) is BatchPromise:
        return origin(p, error)
    return ""


def consumer_failure(interface: str, p: Promise, error: PolybusError,
                     args: tuple[Any, ...], kwargs: dict[str, Any]) -> DonePromise:
    """The failed promise of an overlapped call to ``interface`` (made with ``args`` and
    ``kwargs``) whose argument ``p`` failed with ``error``."""
    consumer = consumer_error(interface, error, _origin(p, error))
    consumer.call = call_text(
        interface, [_EARLIER if isinstance(a, Promise) else a for a in args],
        {k: _EARLIER if isinstance(v, Promise) else v for k, v in kwargs.items()})
    failed(consumer)
    return DonePromise(None, consumer, interface)
