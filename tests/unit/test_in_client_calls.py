"""A call to a module with ``replication = 0``, without a run: the entry calls the
function in the calling thread with the arguments as they are (promises and broadcast
handles given as their values, as a replica receives them), and an async call's promise
is answered when it is made, its failure raised where it is used."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from polybus.client.completion import as_completed
from polybus.client.inclient import DonePromise, InClient
from polybus.client.promise import Promise, wait
from polybus.client.shared import Shared
from polybus.errors import RemoteException


def _entry(fn: Any, sync: bool = False) -> InClient:
    return InClient(fn, fn.__name__, "server", None, sync)  # type: ignore[arg-type]


def test_arguments_are_the_caller_s_objects() -> None:
    got: list[Any] = []

    def keep(*args: Any, **kwargs: Any) -> int:
        got.extend([*args, *kwargs.values()])
        return len(got)

    a, xs, d = np.arange(3), [1, 2], {"k": [3]}
    assert _entry(keep, sync=True)((a, xs), {"d": d}) == 3
    assert got[0] is a and got[1] is xs and got[2] is d  # (not copied, not encoded)


def test_promises_and_handles_are_given_as_their_values() -> None:
    def echo(*args: Any) -> Any:
        return args

    ready = DonePromise(7, None, "f")
    handle = Shared("key", np.ones(2))
    got = _entry(echo, sync=True)((ready, [ready, {"h": handle}], handle, (1, ready)), {})
    assert got[0] == 7 and type(got[0]) is int
    assert got[1][0] == 7 and type(got[1][0]) is int and got[1][1]["h"] is handle.value
    assert got[2] is handle.value and got[3] == (1, 7) and type(got[3][1]) is int


def test_an_async_call_gives_a_promise_already_answered() -> None:
    calls: list[int] = []

    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    f = _entry(double)
    p = f((4,), {})
    assert calls == [4] and f.calls == 1  # (run at once)
    assert type(p) is DonePromise and isinstance(p, Promise)
    assert p.done and p + 1 == 9 and wait([p]) == [8] and isinstance(p, int)
    assert [wait(q) for q in as_completed([f((1,), {}), 5])] == [2, 5]


def test_a_failure_is_raised_where_the_promise_is_used() -> None:
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    p = _entry(boom)((3,), {})  # (no exception here)
    assert p.done
    with pytest.raises(RemoteException) as e:
        wait(p)
    assert e.value.remote_type == "ValueError" and e.value.remote_message == "bad 3"
    assert e.value.call == "boom(3)" and e.value.interface == "boom"
    assert 'in boom\n    raise ValueError(f"bad {x}")' in e.value.remote_traceback
    with pytest.raises(RemoteException):
        _entry(boom, sync=True)((3,), {})


def test_ctrl_c_in_the_function_is_not_a_call_s_failure() -> None:
    def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _entry(stop)((), {})


def test_sys_exit_in_the_function_fails_the_call_alone() -> None:
    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(RemoteException, match="SystemExit"):
        _entry(leave, sync=True)((), {})


def test_a_failed_promise_passed_to_an_async_call_fails_that_call_s_promise() -> None:
    """As a replica's failed call fails its consumer (client/upstream.py): raised where
    the consumer's promise is used, as an upstream failure. It was raised at the
    consumer's call, out of a ``try`` that held only its ``wait``."""
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    def double(x: int) -> int:
        return 2 * x

    failing = _entry(boom)((3,), {})
    q = _entry(double)((failing,), {})  # (no exception here)
    assert type(q) is DonePromise and q.done
    r = _entry(double)((), {"x": q})  # (two stages: where it began is kept)
    with pytest.raises(RemoteException) as e:
        wait(q)
    assert e.value.remote_type == "ValueError"
    assert e.value.remote_message == "an upstream call failed: bad 3"
    assert e.value.interface == "double" and e.value.origin == "boom"
    assert e.value.call == "double(<an earlier call's value>)"
    assert "raised in boom, upstream of double" in str(e.value)
    with pytest.raises(RemoteException) as e2:
        wait(r)
    assert e2.value.origin == "boom, upstream of double"
    with pytest.raises(RemoteException) as e3:  # (a sync call waits for it at the call)
        _entry(double, sync=True)((failing,), {})
    assert e3.value.remote_message == "bad 3"


def test_a_failed_promise_the_program_saw_fail_raises_at_the_call_it_is_passed_to() -> None:
    """A failure the program has had raised (its ``wait`` caught it) is an answered
    failed promise: passed to a replica's async call, that call raises it at once, its
    value taken. A call made in the client gave a failed promise instead, and the same
    program raised at another line with 0 replicas than with 1."""
    def boom(x: int) -> int:
        raise ValueError(f"bad {x}")

    def double(x: int) -> int:
        return 2 * x

    failing = _entry(boom)((3,), {})
    with pytest.raises(RemoteException):
        wait(failing)
    with pytest.raises(RemoteException) as e:  # (at the call, as a replica's)
        _entry(double)((failing,), {})
    assert e.value.remote_message == "bad 3" and e.value.interface == "boom"
