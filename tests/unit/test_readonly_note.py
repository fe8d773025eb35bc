"""The note a replica adds to a write refused by a read-only argument: a cached operand,
or an array the client sent read-only over shm."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar

import numpy as np

from polybus.worker import readonly
from polybus.worker.replies import failure

HELD: list[Any] = []  # (the note knows a cached operand while the cache holds it)


def frozen(n: int = 3) -> np.ndarray[Any, Any]:
    """An array as the operand cache holds it."""
    a = np.zeros(n)
    a.flags.writeable = False
    readonly.held(a)
    HELD.append(a)
    return a


def sent_read_only(n: int = 3) -> np.ndarray[Any, Any]:
    """An array as a frozen argument arrives over shm: read-only, not in the cache."""
    a = np.zeros(n)
    a.flags.writeable = False
    return a


def refused(fn: Any, *args: Any, **kwargs: Any) -> str:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:
        fail = failure(7, exc, fn, args, kwargs)
        assert fail.type == type(exc).__name__
        return fail.message
    raise AssertionError("it did not raise")


def both(a: Any, b: Any) -> None:
    a[0] = 1


def spread(x: Any, *arrays: Any) -> None:
    arrays[0][0] = 1


def both_at_once(a: Any, b: Any) -> None:
    np.add(a, b, out=b if b.flags.writeable else a)[0] = 1


def test_the_read_only_arguments_the_failing_line_names_are_named_and_the_copy_shown() -> None:
    assert refused(both_at_once, frozen(), frozen()) == (
        "output array is read-only (a and b are cached operands: cached operands "
        "are read-only and shared between calls, so copy one before writing to it, "
        "e.g. a = a.copy())")
    assert refused(both, frozen(), frozen()).endswith(
        "(a is a cached operand: cached operands are read-only and shared between calls, "
        "so copy one before writing to it, e.g. a = a.copy())")  # (b is not on its line)


def test_a_write_into_an_array_of_the_functions_own_blames_no_argument() -> None:
    def own(a: Any, b: Any) -> None:
        c = np.frombuffer(bytes(8), dtype=np.float64)  # read-only: over bytes
        c[0] = 1.0

    assert refused(own, frozen(), frozen()) == "assignment destination is read-only"
    assert refused(both, frozen(), b=np.zeros(2)).startswith(
        "assignment destination is read-only (a is a cached operand: ")


def test_extra_positional_arguments_are_named_by_their_place() -> None:
    assert refused(spread, np.zeros(2), frozen()).endswith(
        "(arrays[0] is a cached operand: cached operands are read-only and shared between "
        "calls, so copy one before writing to it, e.g. arrays[0].copy())")


def test_no_note_without_a_read_only_argument_or_for_another_error() -> None:
    def own(a: Any) -> None:
        np.broadcast_to(a, (2, 2))[0, 0] = 1

    assert refused(own, np.zeros(2)) == "assignment destination is read-only"

    def other(a: Any) -> None:
        raise TypeError("read-only")

    assert refused(other, frozen()) == "read-only"
    assert failure(7, ValueError("x is read-only")).message == "x is read-only"


def test_an_argument_sent_read_only_is_named_as_such_not_as_a_cached_operand() -> None:
    assert refused(both, sent_read_only(), np.zeros(2)).endswith(
        "(a was read-only in the client (flags.writeable = False), and over shm such an "
        "array arrives read-only, its memory shared, so copy it before writing to it, "
        "e.g. a = a.copy())")
    # Beside a cached operand on the same line, each is named for what it is.
    assert refused(both_at_once, sent_read_only(), frozen()).endswith(
        "(b is a cached operand, and a was read-only in the client (flags.writeable = "
        "False), and over shm such an array arrives read-only, its memory shared, so copy "
        "it before writing to it, e.g. a = a.copy())")


def into_first(xs: Any) -> None:
    xs[0][0] = 1


def into_key(d: Any) -> None:
    d["b"][1][0] = 1


def test_an_operand_inside_a_list_or_dict_argument_is_named_by_its_place() -> None:
    # (a broadcast handle inside a list or dict arrives as the cache's read-only array)
    assert refused(into_first, [frozen(), 3]).endswith(
        "(xs[0] is a cached operand: cached operands are read-only and shared between "
        "calls, so copy one before writing to it, e.g. xs[0] = xs[0].copy())")
    assert refused(into_key, {"a": 1, "b": [0, frozen()]}).endswith(
        "(d['b'][1] is a cached operand: cached operands are read-only and shared between "
        "calls, so copy one before writing to it, e.g. d['b'][1] = d['b'][1].copy())")


def unpacked(pair: Any) -> None:
    m, _v = pair
    m *= 2


def a_view(pair: Any) -> None:
    head = pair[0][:2]
    head[0] = 1


def test_an_operand_written_through_a_local_name_is_named_by_both() -> None:
    # The trial's `m, v = pair; m *= 2` got numpy's bare words: its line names no argument.
    assert refused(unpacked, [frozen(), np.zeros(2)]) == (
        "output array is read-only (m (pair[0]) is a cached operand: cached operands are "
        "read-only and shared between calls, so copy one before writing to it, e.g. "
        "m = m.copy())")
    assert refused(a_view, [frozen(), 1]).endswith(
        "(head (a view of pair[0]) is a cached operand: cached operands are read-only and "
        "shared between calls, so copy one before writing to it, e.g. head = head.copy())")


def _held_many(n: int) -> list[np.ndarray[Any, Any]]:
    out = [np.zeros(3) for _ in range(n)]
    for a in out:
        a.flags.writeable = False
        readonly.held(a)
    return out


def test_the_table_of_cached_arrays_lets_go_of_those_gone() -> None:
    """Arrays the cache held and let go are forgotten as new ones come (their entries
    have no callback), an array still held stays known however many went meanwhile, and
    an array that took the id of one gone is not taken for a cached operand."""
    kept = frozen()
    gone = _held_many(3000)
    del gone
    fillers = [sent_read_only() for _ in range(3000)]  # (the ids of those gone, taken)
    assert not any(readonly._is_cached(f) for f in fillers)
    live = _held_many(3000)
    dead = sum(1 for ref in readonly._cached.values() if ref() is None)
    assert dead < 1024, dead
    assert readonly._is_cached(kept) and all(readonly._is_cached(a) for a in live)


class _GoneMeanwhile(weakref.ref):  # type: ignore[type-arg]
    """A dead entry whose id another thread's Put takes while `_prune` looks at it."""

    taker: ClassVar[list[np.ndarray[Any, Any]]] = []

    def __call__(self) -> Any:
        if _GoneMeanwhile.taker:  # (the other thread's held_array, at this id: once)
            readonly.held(_GoneMeanwhile.taker.pop())
        return None


def test_pruning_keeps_an_entry_another_thread_made_meanwhile() -> None:
    """`_prune` looks at a dead entry while another thread notes a new cached array under
    the same id: the new entry stays (it was taken out with the dead one, and a write
    into that cached operand lost its note)."""
    live = np.zeros(3)
    live.flags.writeable = False
    _GoneMeanwhile.taker.append(live)
    readonly._cached[id(live)] = _GoneMeanwhile(np.zeros(1))
    try:
        readonly._prune()
        assert readonly._is_cached(live)
    finally:
        readonly._cached.pop(id(live), None)
