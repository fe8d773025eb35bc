"""A promise waited for the way asyncio and concurrent.futures wait for their own futures
(`await p`, `concurrent.futures.as_completed`), as code ported from Ray or a process pool
does, is refused with what to use instead, not an error about polybus's insides."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf

import pytest

from polybus.client.done import DonePromise
from polybus.errors import UsageError


def test_awaiting_a_promise_says_how_to_wait_for_it() -> None:
    # (it was Python's "object CallPromise can't be used in 'await' expression", naming
    # a class the program never wrote; Ray's ObjectRef is awaitable)
    p = DonePromise(5, None, "echo")

    async def waits() -> object:
        return await p

    with pytest.raises(UsageError) as e:
        asyncio.run(waits())
    assert str(e.value) == (
        "a polybus promise cannot be awaited (it is not an asyncio future): use it as its "
        "value, or polybus.wait(p), which blocks until it is answered; in a coroutine whose "
        "event loop must go on meanwhile, `await asyncio.to_thread(polybus.wait, p)`")


@pytest.mark.parametrize("waits", [
    lambda ps: list(cf.as_completed(ps)),
    lambda ps: cf.wait(ps),
], ids=["as_completed", "wait"])
def test_concurrent_futures_waits_say_to_use_polybus_own(waits: object) -> None:
    # (it was "AttributeError: 'int' object has no attribute '_condition'": the
    # promise's answer looked up for a Future's lock)
    ps = [DonePromise(1, None, "f"), DonePromise(2, None, "f")]
    with pytest.raises(UsageError) as e:
        waits(ps)  # type: ignore[operator]
    assert str(e.value) == (
        "a polybus promise is not a concurrent.futures Future: concurrent.futures.wait() "
        "and as_completed() cannot wait for it; use polybus.wait(promises, timeout=...) "
        "and polybus.as_completed(promises, timeout=...)")


def test_a_promise_is_still_its_value() -> None:
    p = DonePromise({"a": 1}, None, "f")
    assert p["a"] == 1 and isinstance(p, dict) and p.done  # type: ignore[index]
