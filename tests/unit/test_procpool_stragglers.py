"""A call put into a replica's process pool just as the pool breaks ends, alone.

On CPython 3.11 the executor's thread marks the pool broken and fails the calls it holds
without the lock that ``submit`` takes: a call submitted in that instant gets a future
that nothing will ever answer (dropped by the sweep's ``clear()``, or left behind it; or
the sweep itself dies of "dictionary changed size during iteration", leaving every call
after it). The replica only learnt of it when another call found the pool broken, so a
call that came as an idle pool broke, with none after it, waited for ever.

Here the break is injected at that exact moment: the executor's ``submit`` kills a
process of the pool, waits for the executor's thread to be done with it, and hands back
the future 3.11 may hand back then, one that will never be answered: still pending (the
call never got to a process) or running (it did, and was lost with it). Each call ends,
as soon as the pool has broken, with no other call after it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

import pytest

from polybus.usernames import import_name
from polybus.worker.procpool import ProcessPool
from polybus.worker.replies import PoolDied

SERVER = "import os\n\n\ndef f(x):\n    return [x, os.getpid()]\n"
HANG_GUARD_S = 60.0  # (a bound on a wait that never ends without the fix, not a speed)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[ProcessPool]:
    (tmp_path / "server.py").write_text(SERVER)
    pp = ProcessPool(2, tmp_path / "server.py", import_name("server"), "server-0")
    try:
        yield pp
    finally:
        pp.close(grace=0.0)  # (the pool in place; a broken one's processes are ended)


def _break_at_next_submit(pp: ProcessPool, *, ran: bool) -> tuple[list[int], list[Future[Any]]]:
    """The next submit to ``pp``'s executor kills one of its processes, waits until the
    executor's thread has failed what it held and ended, and returns a future nothing
    will answer (``ran``: marked running, as one the pool took and lost). Returns the
    pid killed and the futures handed out, once it has happened."""
    executor = pp._pool.executor
    real_submit = executor.submit
    manager = getattr(executor, "_executor_manager_thread")  # noqa: B009 (untyped)
    killed: list[int] = []
    handed: list[Future[Any]] = []

    def submit(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        executor.submit = real_submit  # type: ignore[method-assign]  # (once)
        victim = pp._pool.children[0]
        killed.append(victim.pid or 0)
        victim.kill()
        manager.join(HANG_GUARD_S)
        assert not manager.is_alive()
        future: Future[Any] = Future()
        if ran:
            future.set_running_or_notify_cancel()
        handed.append(future)
        return future

    executor.submit = submit  # type: ignore[method-assign]
    return killed, handed


def _in_a_thread(fn: Callable[[], Any]) -> Any:
    """``fn()``'s value or exception (raised here), or a failure if it never ends."""
    out: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            out.append((True, fn()))
        except BaseException as exc:
            out.append((False, exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert out, "the call never ended: the pool broke under it and nothing answered it"
    ok, value = out[0]
    if not ok:
        raise value
    return value


def _release(handed: list[Future[Any]]) -> None:
    """(If the test failed: free a thread still waiting on a future nothing answered.)"""
    for f in handed:
        with contextlib.suppress(InvalidStateError):
            f.set_exception(RuntimeError("the test is over"))


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_call_submitted_as_the_idle_pool_breaks_runs_in_the_new_pool(
        pool: ProcessPool, idempotent: bool) -> None:
    """It never got to a process: it runs in the new pool, as a call that found the pool
    broken at submit does (not failed, even when its interface is not idempotent), and
    so does the next call."""
    call = pool.wrap("f", idempotent)
    before = {p.pid for p in pool._pool.children}
    killed, handed = _break_at_next_submit(pool, ran=False)
    try:
        value, after = _in_a_thread(lambda: (call(1), call(2)))
    finally:
        _release(handed)
    assert killed and len(handed) == 1
    assert value[0] == 1 and after[0] == 2
    assert value[1] not in before and after[1] not in before  # (the new pool ran them)


def test_a_call_lost_with_the_pool_as_it_broke_runs_again_alone_and_answers(
        pool: ProcessPool) -> None:
    call = pool.wrap("f")
    before = {p.pid for p in pool._pool.children}
    killed, handed = _break_at_next_submit(pool, ran=True)
    try:
        value, after = _in_a_thread(lambda: (call(1), call(2)))
    finally:
        _release(handed)
    assert killed and len(handed) == 1
    assert value[0] == 1 and value[1] not in before
    assert after[0] == 2


def test_a_not_idempotent_call_lost_as_the_pool_broke_fails_typed(pool: ProcessPool) -> None:
    call = pool.wrap("f", idempotent=False)
    killed, handed = _break_at_next_submit(pool, ran=True)

    def lost_then_next() -> tuple[PoolDied, Any]:
        # (one thread: a new pool's processes end with the thread that started it)
        with pytest.raises(PoolDied) as lost:
            call(1)
        return lost.value, call(2)

    try:
        lost, after = _in_a_thread(lost_then_next)
    finally:
        _release(handed)
    assert lost.error == "WorkerDiedError"
    message = str(lost)
    assert f"(pid {killed[0]}) was killed by signal 9 (SIGKILL)" in message, message
    assert "not idempotent" in message, message
    assert after[0] == 2
