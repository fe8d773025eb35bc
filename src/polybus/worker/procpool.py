"""``pool = "processes:N"``: a replica runs pure-Python calls in N child processes.

Threads cannot run pure-Python work in parallel (the GIL); child processes can. Each
child imports the module once; a call's arguments and answer cross to the child by
pickle, which is safe here: both ends are this replica's own processes. The answer is
pickled by the child itself and unpickled by the call's own thread here, so one that
does not unpickle (a class whose ``__reduce__`` raises there) fails its call alone.

The children end with the replica: when it stops they are ended, not waited for (a call
may run on for ever, or ignore SIGTERM), and the kernel kills them if it dies (an idle
child would otherwise wait for ever on a queue whose writing end it holds itself).

A child that dies (the function called ``os._exit``, crashed, or was killed: the OOM
killer, a stray SIGKILL) breaks the executor for good: it fails the calls in it and
takes no more. The replica then starts a new pool (the module imported afresh in each
child) and serves on. The calls the pool was running (at most N: the others wait for a
slot in the replica, poolslots.py) are settled as a lost replica's are
(docs/reliability.md): an idempotent interface's call runs again, once, alone in the
new pool, so that a child that dies then died of that call: it fails with
``PoisonCallError``; a call of an interface that is not idempotent is not run again and
fails with ``WorkerDiedError``. Both say how the child ended (`replies.PoolDied`).

Every call put in a pool ends, however it broke: a thread of the pool's own
(`ProcessPool._watch`) ends, once the executor is done, any call the executor left
unanswered (CPython 3.11's can leave one submitted as it breaks), rather than leaving it
to wait until another call finds the pool broken. One that never got to a child runs
in the new pool as if it had come after the break.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from polybus.usernames import key_of
from polybus.worker.lifetime import how_it_ended
from polybus.worker.pipelocks import pool_context
from polybus.worker.poolslots import Slots
from polybus.worker.procchild import invoke, load, ready
from polybus.worker.replies import CHILD_TRACEBACK, PoolDied, unreadable

log = logging.getLogger("polybus.worker")
_SUBMITS = 3  # pools found broken in a row before a call gets into one: it fails
# How long a broken pool's executor thread is waited for, its children all dead, before
# what it left is swept regardless (it ends at once; this bounds a call's wait if not)
_MANAGER_END_S = 10.0


@dataclass(eq=False)
class _Pool:
    """One executor and its children; ``broken`` says how it broke, once it has.

    ``futures``: the calls put in it and not yet taken out (`submit`), each ended by
    `sweep` if the executor leaves it unanswered; ``killed``: the children the replica
    killed itself (not the news of how it broke)."""

    executor: ProcessPoolExecutor
    children: list[BaseProcess] = field(default_factory=list)
    broken: str | None = None
    manager: threading.Thread | None = None  # (the executor's thread)
    watcher: threading.Thread | None = None  # (`ProcessPool._watch`'s)
    futures: set[Future[Any]] = field(default_factory=set)
    killed: set[int] = field(default_factory=set)
    swept: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def submit(self, *args: Any) -> Future[Any]:
        """``invoke(*args)`` put in the pool (BrokenProcessPool: it is broken, or swept)."""
        with self.lock:  # (a sweep comes before this submit, or after it has its future)
            if self.swept:
                raise BrokenProcessPool("the process pool was swept")
            future = self.executor.submit(invoke, *args)
            self.futures.add(future)
        return future

    def done(self, future: Future[Any]) -> None:
        with self.lock:
            self.futures.discard(future)

    def sweep(self) -> None:
        """Once the executor's thread has ended (nothing else answers a call), end every
        call still in the pool: one that never got to a child with `NeverRan` (it runs in
        the next pool, as if it had come after the break), one that did with
        BrokenProcessPool (it was lost with the pool). None goes in after this."""
        with self.lock:
            self.swept = True
            left = list(self.futures)
        for future in left:
            exc = (BrokenProcessPool("the pool broke with this call in it") if future.running()
                   else NeverRan("the pool broke before this call got to a process"))
            with contextlib.suppress(InvalidStateError):  # (answered, or cancelled)
                future.set_exception(exc)


class NeverRan(BrokenProcessPool):
    """A call the pool's executor took as it broke and then left, never given to a child."""


class ProcessPool:
    """Runs a module's functions in child processes; `wrap` makes the callables.
    ``replica``: its name, for what a call lost with a child is told."""

    def __init__(self, workers: int, module_path: Path, module_name: str,
                 replica: str = "") -> None:
        self._workers = workers
        self._initargs = (str(module_path), module_name, os.getpid())
        self._key = key_of(module_name)
        self._replica = replica or "the replica"
        self._slots = Slots(workers)
        self._lock = threading.Lock()  # (held to put a new pool in a broken one's place)
        self._closed = False
        self._pool = self._start()

    def _start(self) -> _Pool:
        """A pool with every child started now, each with the module loaded, so that a
        run's first calls (timed in ``elapsed_s``) do not pay for spawning them. The
        executor spawns a child per submit while none is idle; these submits come
        before any child is up. (A child started here gets the kernel's SIGKILL when the
        thread that started it ends: this one, the worker's main thread or, for a
        pool started again, a pool thread, which runs until the replica stops.)"""
        # Spawned (no forking of a threaded process), its queues' locks pipes: spawn's
        # own are named in /dev/shm, and a SIGKILL of the whole group left them there
        executor = ProcessPoolExecutor(self._workers, mp_context=pool_context(), initializer=load,
                                       initargs=self._initargs)
        pool = _Pool(executor)
        try:
            for f in [executor.submit(ready) for _ in range(self._workers)]:
                f.result()
        except BaseException:
            # (its children killed, its threads waited for: one left running into the
            # interpreter's exit, a stop signal's, closed its wake-up pipe as CPython
            # 3.11's exit wrote to it, "Exception ignored ... Bad file descriptor")
            pool.children = list(executor._processes.values())
            _end(pool, 0.0, wait=True)
            raise
        pool.children = list(executor._processes.values())
        pool.manager = getattr(executor, "_executor_manager_thread", None)
        # The children's answers' pipe: this process held its writing end too, only for
        # children spawned later (none are: all are up). A child killed halfway through
        # an answer left the executor's thread reading the rest for ever, no end of file
        # coming; now that comes once every child has gone, and the pool breaks.
        results = getattr(executor, "_result_queue", None)
        if results is not None:
            results._writer.close()
        pool.watcher = threading.Thread(target=self._watch, args=(pool,), daemon=True,
                                        name="polybus-procpool-watch")
        pool.watcher.start()
        return pool

    def wrap(self, fn_name: str, idempotent: bool = True) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(fn_name, idempotent, args, kwargs)

        call.__name__ = fn_name
        return call

    def _call(self, fn_name: str, idempotent: bool, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        with self._slots.shared():
            first = self._run(fn_name, args, kwargs)
        if not isinstance(first, _Pool):
            return first.value
        serves = f"{self._replica} serves on, with a new process pool"
        if not idempotent:
            raise PoolDied("WorkerDiedError", (
                f"{self._replica}: {first.broken} while this call was in that pool (running, "
                f"or about to run), and the pool went with it; {fn_name} is not idempotent, "
                f"so the call was not run again ({serves})"))
        with self._slots.alone():  # (alone, so that a death now is its own: no third run)
            second = self._run(fn_name, args, kwargs)
        if not isinstance(second, _Pool):
            return second.value
        raise PoolDied("PoisonCallError", (
            f"{self._replica}: {first.broken} while this call was in that pool, and when it "
            f"was run again, alone in a new pool, {second.broken}: the call breaks the pool "
            f"that runs it, and is not run a third time "
            f"(modules.{self._key}.define.{fn_name}.idempotent = false stops the re-run; "
            f"{serves})"))

    def _run(self, fn_name: str, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> _Value | _Pool:
        """The call's value (or the function's exception, raised), or the pool that
        broke while the call was in it (a new one is in its place)."""
        for _ in range(_SUBMITS):
            pool = self._current()
            try:
                future = pool.submit(fn_name, args, kwargs)
            except BrokenProcessPool:  # (it broke before the call got in: never ran)
                self._broke(pool, None)
                continue
            try:
                answer = future.result()
            except NeverRan:  # (it got in as the pool broke, and never ran: as above)
                self._broke(pool, None)
                continue
            except BrokenProcessPool as exc:
                if hasattr(exc, CHILD_TRACEBACK):
                    raise  # (the function's own: it runs a pool of its own)
                self._broke(pool, exc)
                return pool
            finally:
                pool.done(future)
                # (A broken pool's exception is the future's, its traceback holds this
                # frame: with the future too, a cycle that kept the pool, and its
                # queues' pipes, open until a full collection, pool after pool)
                del future
            return _Value(_unpickled(answer))
        raise PoolDied("WorkerDiedError", (
            f"{self._replica}: its process pool broke {_SUBMITS} times in a row before "
            f"this call could get in (each new pool's processes died idle: the worker's "
            f"log may say why); the call did not run"))

    def _current(self) -> _Pool:
        pool = self._pool
        if pool.broken is None:
            return pool
        with self._lock:
            if self._pool.broken is not None:  # (its start failed last time: again)
                self._renew()
            return self._pool

    def _broke(self, pool: _Pool, exc: BrokenProcessPool | None) -> None:
        """``pool`` broke: say how (once), end what is left of it, and start a new one
        in its place (once: the other calls that were in it find it done)."""
        with self._lock:
            if pool.broken is None:
                pool.broken = _how_it_broke(pool, exc)
                log.warning("worker %s: %s; a new process pool is started, and the calls "
                            "that were in the old one run again alone (or fail, if their "
                            "interface is not idempotent)", self._replica, pool.broken)
                _end(pool, 0.0, wait=False)
            if self._pool is pool:
                self._renew()

    def _watch(self, pool: _Pool) -> None:
        """``pool``'s own thread: once one of its children ends (the pool broke, or is
        being ended), see that every call put in it ends too. The executor fails those
        it holds, but on CPython 3.11 its thread does so without the lock ``submit``
        takes, so a call submitted as it breaks can be left neither run nor failed (its
        future dropped by the sweep, or added after it; or the sweep dies of a dict
        changed under it, leaving those after). Nothing answered such a call until
        another call found the pool broken: with none after it, it waited for ever.
        So the rest of the children are killed (now: no call of theirs would answer,
        and one that ignores SIGTERM would hold the executor's thread), and once that
        thread has ended, what it left is swept (`_Pool.sweep`). The new pool is
        started by a call's own thread, as ever: children die with the thread that
        started them, and this one ends here."""
        connection.wait([p.sentinel for p in pool.children])
        if not self._closed:  # (close() gives them their grace)
            gone = set(connection.wait([p.sentinel for p in pool.children], timeout=0))
            for p in pool.children:
                if p.sentinel not in gone and p.pid is not None:
                    pool.killed.add(p.pid)
                    p.kill()
        if pool.manager is not None:
            pool.manager.join(_MANAGER_END_S)
        pool.sweep()

    def _renew(self) -> None:
        """A new pool in the broken one's place (the lock held); PoolDied if it cannot
        be, the broken one left in place for the next call to try again."""
        if self._closed:
            raise PoolDied("WorkerDiedError", f"{self._replica}: {self._pool.broken}, and "
                           "the replica is stopping: its process pool was not started again")
        try:
            self._pool = self._start()
        except Exception as exc:
            raise PoolDied("WorkerDiedError", (
                f"{self._replica}: {self._pool.broken}, and the pool could not be started "
                f"again: {type(exc).__name__}: {exc} (the worker's log may say why)")) from None

    def close(self, grace: float = 1.0) -> None:
        """Cancel the calls not started and end the children: SIGTERM, then SIGKILL after
        ``grace`` s. A running call is not waited for: a SIGTERMed replica used to wait
        as long as it ran (for ever, for a loop). No pool is started after this."""
        with self._lock:
            self._closed = True
            pool = self._pool
        _end(pool, grace, wait=True)
        if pool.watcher is not None:  # (it ends once the executor's thread has: none of
            pool.watcher.join(_MANAGER_END_S)  # the pool's threads left running on)


@dataclass(frozen=True, slots=True)
class _Value:
    value: Any


def _unpickled(answer: bytes) -> Any:
    """The value a child pickled (procchild.invoke); one that does not unpickle here
    fails its call alone (`replies.unreadable`), and the pool serves on."""
    try:
        return pickle.loads(answer)
    except BaseException as exc:  # (what a class's own unpickling code raises, any)
        raise unreadable(exc) from None


def _how_it_broke(pool: _Pool, exc: BrokenProcessPool | None) -> str:
    """"a process of its process pool (pid 12) exited with status 3", or what else
    broke it."""
    cause = exc.__cause__ if exc is not None else None
    # A process's sentinel closes as it exits, before it can be reaped: wait for those.
    # (The executor's thread may reap one first: its exit code is ours once it has.)
    gone = set(connection.wait([p.sentinel for p in pool.children], timeout=0))
    deadline = time.monotonic() + 2.0
    for p in pool.children:
        if p.sentinel in gone:
            p.join(1.0)
            while p.exitcode is None and time.monotonic() < deadline:
                time.sleep(0.005)
    ended = [(p.pid, p.exitcode) for p in pool.children]
    # (The executor SIGTERMs the others once one has died, and `_watch` kills them:
    # those are not the news.)
    died = [(pid, c) for pid, c in ended
            if c is not None and c != -signal.SIGTERM and pid not in pool.killed]
    if cause is not None and not died:  # (none died of itself: an error of the pool's
        # own; one that died halfway through its answer broke the reading of it too)
        lines = [ln.strip() for ln in str(cause).strip().strip("'").splitlines() if ln.strip()]
        return f"its process pool broke: an answer from it could not be read ({lines[-1]})" \
            if lines else "its process pool broke"
    dead = died or [(pid, c) for pid, c in ended if c is not None]
    if dead:
        pid, code = dead[0]
        more = f" (and {len(dead) - 1} more)" if len(dead) > 1 else ""
        return f"a process of its process pool (pid {pid}) {how_it_ended(code)}{more}"
    return "a process of its process pool ended"


def _end(pool: _Pool, grace: float, *, wait: bool) -> None:
    """SIGTERM ``pool``'s children, SIGKILL those left after ``grace`` s, and let its
    executor go (``wait``: for its threads too)."""
    children = pool.children
    for p in children:
        if p.exitcode is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in children:
        if grace > 0:
            p.join(max(0.0, deadline - time.monotonic()))
        if p.exitcode is None:
            p.kill()
            if wait:
                p.join(1.0)
    # The executor finds its pool broken (if it had not), fails what it held, lets go.
    pool.executor.shutdown(wait=wait, cancel_futures=True)

