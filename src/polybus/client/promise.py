"""A promise: the answer of an overlapped call, used as if it were the answer.

The program waits only where a value is first used (CORD's "latest receive"): any
ordinary use — arithmetic, comparison, indexing, iteration, str, numpy — waits for the
answer and then acts on it. `polybus.wait(x)` forces one explicitly, and also forces the
promises inside lists, tuples, dicts and sets (their subclasses too: a namedtuple).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import operator
from typing import TYPE_CHECKING, Any

from polybus.client.calls import _PENDING, expire, waited_on
from polybus.client.futurenames import FutureNames
from polybus.client.unseen import forgotten
from polybus.client.upstreamdue import give_up_due
from polybus.client.waitwatch import waited
from polybus.wire.codec import Ref

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord
    from polybus.client.reactor import Reactor


class Promise(FutureNames):
    """What every promise does (the type a program can test for). It holds nothing: each
    kind of call has its own subclass with what it needs to wait (`CallPromise` here,
    ``client/batchcalls.BatchPromise`` for an aggregated call). Besides ``done``, it has
    the names a future has that a program reaches for (``result(timeout=...)``,
    ``exception``, ``cancel``, ``cancelled``...: client/futurenames.py); any other
    attribute is its answer's."""

    __slots__ = ()

    def __polybus_value__(self) -> Any:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """True once the answer (or error) is here. Never waits: if it is not here yet,
        the answers that have already arrived are taken in first (one look), so a loop
        over ``p.done`` sees its answer come."""
        raise NotImplementedError

    @property
    def _answered(self) -> bool:
        """`done` without the look (for loops over many promises, which read answers
        themselves: as_completed, the HTTP front door)."""
        raise NotImplementedError

    # -- for as_completed (client/completion.py) ------------------------------------
    def _read_answers(self, seconds: float) -> None:
        """Let answers in for up to ``seconds``: one read by the session this promise's
        call went through, which files the answers of any of its calls. (This default,
        for a kind with no session to read, waits for its own answer.)"""
        with contextlib.suppress(Exception):  # (its error is the caller's, when used)
            self.__polybus_value__()

    def _expire(self, now: float) -> None:
        """Fail the call as ``wait`` would if its deadline (its interface's timeout after
        the call was made) is past at ``now`` (time.monotonic()); by default a promise
        has no timeout."""

    # isinstance(p, dict), and so Counter.update(p), json's and numpy's checks, and
    # functools.singledispatch, see the answer's class, as for a proxy (wrapt's, say):
    # isinstance looks at __class__ when the type itself does not match. Counter.update
    # took a dict's promise for a list of its keys, and counted 1 per key. type(p) and
    # isinstance(p, Promise) still say promise, without waiting.
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self.__polybus_value__())

    def __repr__(self) -> str:
        return repr(self.__polybus_value__())

    def __str__(self) -> str:
        return str(self.__polybus_value__())

    def __format__(self, spec: str) -> str:
        return format(self.__polybus_value__(), spec)

    def __bool__(self) -> bool:
        return bool(self.__polybus_value__())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__polybus_value__(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.__polybus_value__(), name, value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        arr = np.asarray(self.__polybus_value__())
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def __hash__(self) -> int:
        return hash(self.__polybus_value__())

    def __iter__(self) -> Any:
        return iter(self.__polybus_value__())

    def __reversed__(self) -> Any:
        return reversed(self.__polybus_value__())

    def __len__(self) -> int:
        return len(self.__polybus_value__())

    def __contains__(self, item: Any) -> bool:
        return item in self.__polybus_value__()

    def __index__(self) -> int:
        return operator.index(self.__polybus_value__())

    def __int__(self) -> int:
        return int(self.__polybus_value__())

    def __float__(self) -> float:
        return float(self.__polybus_value__())

    def __complex__(self) -> complex:
        return complex(self.__polybus_value__())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__polybus_value__()(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (and deep-copied) as its value: never its record, batch or reactor,
        # which hold sockets and threads.
        return _as_is, (self.__polybus_value__(),)


def _as_is(value: Any) -> Any:
    return value


def _force(x: Any) -> Any:
    return x.__polybus_value__() if isinstance(x, Promise) else x


def _binary(op: Any) -> Any:
    def fwd(self: Promise, other: Any) -> Any:
        return op(self.__polybus_value__(), _force(other))

    def rev(self: Promise, other: Any) -> Any:
        return op(_force(other), self.__polybus_value__())

    return fwd, rev


_BINARY: dict[str, Any] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "matmul": operator.matmul, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift,
    "rshift": operator.rshift, "divmod": divmod,
}
_COMPARE: dict[str, Any] = {"lt": operator.lt, "le": operator.le, "eq": operator.eq, "ne": operator.ne,
            "gt": operator.gt, "ge": operator.ge, "getitem": operator.getitem}
_UNARY: dict[str, Any] = {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs,
          "invert": operator.invert}


def _unary(op: Any) -> Any:
    return lambda self: op(self.__polybus_value__())


def _install() -> None:
    for name, op in _BINARY.items():
        fwd, rev = _binary(op)
        setattr(Promise, f"__{name}__", fwd)
        setattr(Promise, f"__r{name}__", rev)
    for name, op in _COMPARE.items():
        setattr(Promise, f"__{name}__", _binary(op)[0])
    for name, op in _UNARY.items():
        setattr(Promise, f"__{name}__", _unary(op))
    # round(p, ndigits) passes a second argument the unary ops do not take.
    setattr(Promise, "__round__",  # noqa: B010
            lambda self, *nd: round(self.__polybus_value__(), *nd))
    setattr(Promise, "__setitem__",  # noqa: B010 - installed with the rest
            lambda self, k, v: operator.setitem(self.__polybus_value__(), _force(k), _force(v)))
    setattr(Promise, "__delitem__",  # noqa: B010
            lambda self, k: operator.delitem(self.__polybus_value__(), _force(k)))


_install()

# What a subclass must not take from another base (a msgspec Struct defines these too).
_OWN = frozenset(k for k in Promise.__dict__ if k not in (
    "__slots__", "__module__", "__doc__", "__init__", "__polybus_value__", "done",
    "_answered", "__class__"))  # (a Struct has no __class__ of its own; setattr cannot install one)


def behave_as_promise(cls: type[Promise]) -> None:
    """Give ``cls`` every behaviour of Promise that a base before Promise in its MRO
    (a msgspec Struct's equality, hash, repr, setattr) would otherwise take over."""
    for name in _OWN:
        if name not in cls.__dict__ and getattr(cls, name, None) is not Promise.__dict__[name]:
            setattr(cls, name, Promise.__dict__[name])


class CallPromise(Promise):
    """The promise of one call that has a record of its own (client/calls.py)."""

    __slots__ = ("_reactor", "_rec")

    def __init__(self, rec: CallRecord, reactor: Reactor) -> None:
        object.__setattr__(self, "_rec", rec)
        object.__setattr__(self, "_reactor", reactor)

    def __polybus_value__(self) -> Any:
        rec = self._rec
        value = rec.value
        if value is not _PENDING and type(value) is not Ref:
            return value  # (answered: the common case once the first wait has read)
        waited(self)  # (its value is not here: a priority that reads it waits, fwdprio.py)
        if rec.done:
            return rec.outcome()
        return self._reactor.wait(rec, rec.dispatcher.timeout)

    @property
    def done(self) -> bool:
        rec = self._rec
        if not rec.done:
            self._reactor.poll(batches=False)  # (what has arrived is taken in: Promise.done)
        return bool(rec.done)

    @property
    def _answered(self) -> bool:
        return bool(self._rec.done)

    def _read_answers(self, seconds: float) -> None:
        self._reactor.step(None, seconds)

    def __del__(self) -> None:
        rec = self._rec
        keeper = getattr(rec.dispatcher, "keeper", None)
        if keeper is not None:  # (forward = "keep": its value let go where kept, fwdown.py)
            keeper.dropped.append(rec)
        if rec.error is None:
            if rec.value is _PENDING:  # (its error, if one comes, is said when it does)
                rec.orphan = True
        elif waited_on(rec):  # (decided when its consumer ends: Forwarder.answered)
            rec.orphan = True
        else:  # (failed, and the program never saw it)
            forgotten(rec.error, rec.dispatcher.interface, getattr(rec, "passed", False))

    def _expire(self, now: float) -> None:
        expire(self._rec, self._rec.dispatcher.timeout, now, self._reactor.poll)
        upstream = self._reactor.upstream  # (the calls whose values it needs: upstreamdue.py)
        if upstream is not None and not self._rec.done:
            give_up_due(upstream(self._rec), self._reactor.poll)

    def cancel(self) -> bool:
        from polybus.client.cancel import cancel_call

        return cancel_call(self._rec, self._reactor)

    def cancelled(self) -> bool:
        from polybus.client.cancel import is_cancelled

        return is_cancelled(self._rec.error)


def wait(x: Any, timeout: float | None = None) -> Any:
    """The value of ``x``: a promise is waited for; lists, tuples, dicts, sets,
    frozensets and deques of promises are waited for element by element (new containers, to any
    depth); anything else is returned as it is.

    ``timeout`` (seconds): TimeoutError if the promises in ``x`` are not all answered
    within it, saying how many were not (client/completion.py `settle`); their calls go
    on, and a later wait or use takes their answers.

    A container is rebuilt as its own type: a namedtuple by its ``_make``, an
    OrderedDict, a defaultdict (its ``default_factory`` kept) or another dict or list
    subclass as a shallow copy of it (``copy.copy``, its attributes kept) with the
    waited values in place, a set, frozenset or other tuple subclass from the waited
    values. One that cannot be rebuilt so (its copy or its constructor raises) is left
    as it is, promises and all."""
    if timeout is not None:
        from polybus.client.completion import settle

        settle(x, timeout)
    if isinstance(x, Promise):
        return x.__polybus_value__()
    t = type(x)
    if t is not list and t is not tuple and t is not dict and not isinstance(x, _WALKED):
        return x
    return _walked(x)


# What `wait` walks into: these and their subclasses (the exact types are checked first)
_WALKED = (list, tuple, dict, set, frozenset, collections.deque)

# Past this many containers deep, `_walked` keeps the ones it is inside to find a cycle
# (a list holding itself would grow its stack for ever); nearer the top, none is kept.
_CYCLE_DEPTH = 64


def _walked(x: Any) -> Any:
    """`wait` of a container, walked with a stack of its own rather than Python's: a
    value nested deeper than the recursion limit (a sync call's answer 500 lists deep,
    two frames a level) was a RecursionError. Each level is [container, an iterator
    over its items (a dict's values), the values waited for so far]."""
    path: list[tuple[Any, Any, list[Any]]] = [(x, _items(x), [])]
    inside: set[int] = set()
    while True:
        top = path[-1]
        out = top[2]
        for v in top[1]:
            t = type(v)
            if t is not list and t is not tuple and t is not dict:
                if isinstance(v, Promise):  # (first: it passes isinstance as its answer)
                    out.append(v.__polybus_value__())
                    continue
                if not isinstance(v, _WALKED):
                    out.append(v)
                    continue
            # a container: walked into
            if len(path) >= _CYCLE_DEPTH:
                if id(v) in inside:
                    raise ValueError(f"polybus.wait: a {t.__name__} that contains itself "
                                     "cannot be waited through")
                inside.add(id(v))
            path.append((v, _items(v), []))
            break
        else:
            c = path.pop()[0]
            if len(path) >= _CYCLE_DEPTH:
                inside.discard(id(c))
            t = type(c)
            made = (out if t is list else tuple(out) if t is tuple else
                    dict(zip(c, out, strict=True)) if t is dict else _rebuilt(c, out))
            if not path:
                return made
            path[-1][2].append(made)


def _items(c: Any) -> Any:
    """An iterator over what `_walked` waits for in ``c``: a dict's values, else its items."""
    return iter(c.values() if type(c) is dict or isinstance(c, dict) else c)


def _rebuilt(c: Any, out: list[Any]) -> Any:
    """``c``, a container of a type other than exactly list, tuple or dict, as its own
    type holding ``out`` (its items, or a dict's values, waited for); ``c`` itself if
    it cannot be rebuilt (see `wait`)."""
    t = type(c)
    try:
        if isinstance(c, tuple):
            make = getattr(t, "_make", None)  # (a namedtuple: t(out) would take one field)
            return make(out) if make is not None and hasattr(t, "_fields") else t(out)
        if isinstance(c, set | frozenset):
            return t(out)
        if isinstance(c, collections.deque):  # (its maxlen kept; no slice assignment)
            q = copy.copy(c)
            q.clear()
            q.extend(out)
            return q
        # A list or dict subclass: a copy keeps what its constructor would need
        # (defaultdict's default_factory) and its attributes; then the values go in.
        made = copy.copy(c)
        if isinstance(c, dict):
            for k, v in zip(c, out, strict=True):
                made[k] = v
        else:
            made[:] = out
        return made
    except Exception:
        return c
