"""``pool = "processes:N"``: a replica runs pure-Python calls in N child processes.

Threads cannot run pure-Python work in parallel (the GIL); child processes can. Each
child imports the module once; a call's arguments and answer cross to the child by
pickle, which is safe here: both ends are this replica's own processes.

The children end with the replica: when it stops they are ended, not waited for (a call
may run on for ever, or ignore SIGTERM), and the kernel kills them if it dies (an idle
child would otherwise wait for ever on a queue whose writing end it holds itself).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

_module: ModuleType | None = None


def _load(path: str, name: str, replica: int) -> None:
    global _module
    from polybus.client.stubs import serving
    from polybus.usernames import key_of
    from polybus.worker.lifetime import die_with_parent
    from polybus.worker.module import load_module

    # Sent when the replica's thread that started this child ends: the thread that made
    # the pool (ProcessPool._start), which runs until the replica stops.
    die_with_parent(signal.SIGKILL, replica)
    serving(key_of(name))  # (as its replica: worker/main.py)
    _module = load_module(Path(path), name)


def _ready() -> int:
    return os.getpid()


def _invoke(fn_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    assert _module is not None
    try:
        return getattr(_module, fn_name)(*args, **kwargs)
    except BaseException as exc:  # (sys.exit() and KeyboardInterrupt too, as a thread's)
        # The user's frames are here; in the replica the exception has only the pool's
        # (the child's text rides as a __cause__ that replies.failure would not show).
        from polybus.worker.replies import CHILD_TRACEBACK, remote_traceback

        with contextlib.suppress(Exception):  # (an exception that refuses attributes)
            setattr(exc, CHILD_TRACEBACK, remote_traceback(exc))
        raise


class ProcessPool:
    """Runs a module's functions in child processes; `wrap` makes the callables."""

    def __init__(self, workers: int, module_path: Path, module_name: str) -> None:
        ctx = multiprocessing.get_context("spawn")  # no forking of a threaded process
        self._executor = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_load,
                                             initargs=(str(module_path), module_name, os.getpid()))
        self._start(workers)

    def _start(self, workers: int) -> None:
        """Start every child now, each with the module loaded, so that a run's first
        calls (timed in ``elapsed_s``) do not pay for spawning them. The executor spawns
        a child per submit while none is idle; these submits come before any child is up."""
        pending = [self._executor.submit(_ready) for _ in range(workers)]
        for f in pending:
            f.result()

    def wrap(self, fn_name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._executor.submit(_invoke, fn_name, args, kwargs).result()

        call.__name__ = fn_name
        return call

    def close(self, grace: float = 1.0) -> None:
        """Cancel the calls not started and end the children: SIGTERM, then SIGKILL after
        ``grace`` s. A running call is not waited for: a SIGTERMed replica used to wait
        as long as it ran (for ever, for a loop)."""
        children = list(self._executor._processes.values())  # (3.14 has terminate_workers)
        for p in children:
            p.terminate()
        deadline = time.monotonic() + grace
        for p in children:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join(1.0)
        # The executor now finds its pool broken, fails what it held and lets go.
        self._executor.shutdown(wait=True, cancel_futures=True)
