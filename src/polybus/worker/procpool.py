"""``pool = "processes:N"``: a replica runs pure-Python calls in N child processes.

Threads cannot run pure-Python work in parallel (the GIL); child processes can. Each
child imports the module once; a call's arguments and answer cross to the child by
pickle, which is safe here: both ends are this replica's own processes.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

_module: ModuleType | None = None


def _load(path: str, name: str) -> None:
    global _module
    from polybus.worker.module import load_module

    _module = load_module(Path(path), name)


def _invoke(fn_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    assert _module is not None
    return getattr(_module, fn_name)(*args, **kwargs)


class ProcessPool:
    """Runs a module's functions in child processes; `wrap` makes the callables."""

    def __init__(self, workers: int, module_path: Path, module_name: str) -> None:
        ctx = multiprocessing.get_context("spawn")  # no forking of a threaded process
        self._executor = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_load,
                                             initargs=(str(module_path), module_name))

    def wrap(self, fn_name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._executor.submit(_invoke, fn_name, args, kwargs).result()

        call.__name__ = fn_name
        return call

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
