"""`as_completed`: a program's promises in the order their answers come.

A master that hands out tasks and takes each result as it comes (``ray.wait``,
``concurrent.futures.as_completed``, Dask's ``as_completed``) would otherwise wait for
them in the order it made them, held up by the slowest first.

Given a mapping (``{x: f(x) for x in xs}``), it yields ``(key, promise)`` pairs, so a
program knows which input each answer was for without keying a dict by promises
(which hashes each promise as its value, waiting for each call in turn).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from polybus.client.calls import text_of
from polybus.client.promise import _WALKED, CallPromise, Promise
from polybus.client.pump import enter, leave
from polybus.client.stubs import current_gate
from polybus.errors import PolybusError, UsageError

__all__ = ["as_completed", "settle"]

_STEP_S = 0.05  # the longest one read waits before the promises are looked at again
_LOOK_S = 2e-6  # per promise still waiting: reads between two looks at them all take
# at least this long each, so the looks cost a small share of the time (a look over
# 12,000 promises made as_completed 3.5x slower than waiting in order, looked at after
# each read)


def as_completed(xs: Iterable[Any] | Mapping[Any, Any],
                 timeout: float | None = None) -> Iterator[Any]:
    """Yield each of ``xs`` once its answer is here, the first answered first: the
    promise itself (use it, or ``wait(p)``, which raises the call's error if it
    failed; one given twice comes once); a value that is not a promise comes at once
    (a tuple or list holding one, ``zip(xs, ps)``, is refused: UsageError). ``xs`` a
    mapping: its
    ``(key, value)`` pairs, each once its value's answer is here. A call whose
    interface has a ``timeout`` is yielded failed (CallTimeoutError) once that long has
    passed since it was written to a replica, as ``wait`` would. ``timeout`` (seconds,
    for them all): TimeoutError once it passes with promises still unanswered."""
    _check_timeout("as_completed", timeout)
    if isinstance(xs, Mapping):
        keys: dict[int, list[Any]] = {}  # (a value under several keys: each of its pairs)
        values: list[Any] = []
        for k, v in xs.items():
            if id(v) not in keys:
                keys[id(v)] = []
                values.append(v)
            keys[id(v)].append(k)
        _refuse_held(values, "a value of the mapping")
        return _pairs(keys, values, timeout)
    pending, given = [], set()
    for x in xs:  # (a promise given twice comes once, as concurrent.futures's does)
        if isinstance(x, Promise):
            if id(x) in given:
                continue
            given.add(id(x))
        pending.append(x)
    _refuse_held(pending, "an item")
    return _completed(pending, timeout)


def _refuse_held(xs: list[Any], what: str) -> None:
    """A UsageError for a tuple or list among ``xs`` that holds a promise (``zip(xs,
    ps)``, ``d.items()``): not a promise itself, it would come at once, in the order
    given, before its answer."""
    for x in xs:
        if type(x) in (tuple, list) and any(isinstance(e, Promise) for e in x):
            raise UsageError(
                f"as_completed: {what} given is a {type(x).__name__} that holds a promise, "
                "and would come at once, in the order given, before its answer; to learn "
                "which input each answer is for, give it a dict: as_completed({x: f(x) for "
                "x in xs}) yields the (x, promise) pairs as their answers come")


def _pairs(keys: dict[int, list[Any]], values: list[Any],
           timeout: float | None) -> Iterator[tuple[Any, Any]]:
    """A mapping's pairs as its values are answered: ``keys`` by the id of each of the
    ``values``."""
    for v in _completed(values, timeout):
        for k in keys[id(v)]:
            yield k, v


def _completed(pending: list[Any], timeout: float | None) -> Iterator[Any]:
    total = sum(isinstance(x, Promise) for x in pending)
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    while pending:
        now = time.monotonic()
        still, ready = [], []
        gate = current_gate()
        enter(gate)  # (a call given up on changes what the pump reads: pump.py)
        try:
            for x in pending:
                if isinstance(x, Promise) and not x._answered:  # (neither waits nor reads)
                    x._expire(now)
                    if not x._answered:
                        still.append(x)
                        continue
                ready.append(x)
        finally:
            leave(gate)
        yield from ready
        pending = still
        if not pending:
            return
        look_at = time.monotonic() + min(_STEP_S, len(pending) * _LOOK_S)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(_not_answered("as_completed", pending, total, timeout))
            pending[0]._read_answers(_STEP_S if left is None else min(_STEP_S, left))
            if time.monotonic() >= look_at:
                break



def settle(x: Any, timeout: float) -> None:
    """`polybus.wait`'s ``timeout``: wait at most ``timeout`` seconds for the promises in
    ``x`` (a promise, or the containers `wait` walks into) to be answered, as
    `as_completed` waits for them (a call past its interface's timeout failed as a wait
    fails it); TimeoutError saying how many were not. Nothing is given up: their calls
    go on, and a later wait takes their answers."""
    _check_timeout("wait", timeout)
    promises = _promises_in(x)
    if not promises:
        return
    try:
        for _ in _completed(list(promises), timeout):
            pass
        return
    except TimeoutError as exc:
        if isinstance(exc, PolybusError):  # (not the wait's own)
            raise
    left = [p for p in promises if not p._answered]
    if left:  # (what came meanwhile, not yet read: taken in, and looked at once more)
        left[0]._read_answers(0)
        left = [p for p in left if not p._answered]
    if not left:
        return
    if len(promises) > 1:
        raise TimeoutError(_not_answered("wait", left, len(promises), timeout))
    call = _call_of(left[0])
    raise TimeoutError(f"polybus.wait: the promise{f' of {call}' if call else ''} was "
                       f"not answered within {timeout:g} s; its call goes on, and a "
                       "later wait or use of the promise takes its answer")


def _not_answered(what: str, left: list[Any], total: int, timeout: float | None) -> str:
    """A wait's or as_completed's TimeoutError: how many of how many, the first by its
    call, and that nothing was given up."""
    call = _call_of(left[0])
    were = "was" if len(left) == 1 else "were"
    return (f"polybus.{what}: {len(left)} of the {total} promises {were} not answered within "
            f"{timeout:g} s{f' (the first: {call})' if call else ''}; their calls go on, and "
            "a later wait takes their answers")


def _check_timeout(what: str, timeout: float | None) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout):
        raise UsageError(f"polybus.{what}: timeout must be a number of seconds or None, "
                         f"got {timeout!r}")


def _call_of(p: Promise) -> str:
    """The call ``p`` is the promise of, as an error names it (``slow(3.0)``; for an
    aggregated call's, whose batch keeps no one call's arguments, ``a call to slow``)."""
    if type(p) is CallPromise:
        return text_of(p._rec)
    batcher = getattr(getattr(p, "_rec", None), "batcher", None)
    return f"a call to {batcher.interface}" if batcher is not None else ""


def _promises_in(x: Any) -> list[Promise]:
    """The promises in ``x``, each once: ``x`` itself, or those in the containers
    `wait` walks into (a dict's values), to any depth."""
    found: dict[int, Promise] = {}
    todo = [x]
    seen: set[int] = set()
    while todo:
        v = todo.pop()
        if isinstance(v, Promise):  # (first: it passes isinstance as its answer)
            found.setdefault(id(v), v)
        elif isinstance(v, _WALKED) and id(v) not in seen:
            seen.add(id(v))
            todo.extend(v.values() if isinstance(v, dict) else v)
    return list(found.values())
