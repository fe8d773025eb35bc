"""Loading a user's module from its file, and the interfaces it serves."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from polybus.errors import ConfigError
from polybus.usernames import key_of


def load_module(path: Path | str, name: str | None = None) -> ModuleType:
    """Import a module from its file; its folder goes on sys.path for its own imports."""
    p = Path(path).resolve()
    if not p.is_file():
        raise ConfigError(f"module source {p} does not exist")
    folder = str(p.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    mod_name = name or p.stem
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the user's mistake: name their file and line
        from polybus.usercode import import_failure

        sys.modules.pop(mod_name, None)
        raise import_failure(exc, key_of(mod_name), p) from None
    return module


def interfaces(module: ModuleType, names: Iterable[str] = ()) -> dict[str, Callable[..., Any]]:
    """``names`` if given, else every public function defined in the module itself."""
    wanted = list(names)
    if wanted:
        out = {}
        for n in wanted:
            fn = getattr(module, n, None)
            if not callable(fn):
                raise ConfigError(f"{module.__file__}: {n!r} is not a function of the module")
            out[n] = _refused(n) if is_async(fn) else fn
        return out
    return {n: (_refused(n) if is_async(f) else f) for n, f in vars(module).items()
            if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == module.__name__}


ASYNC_NOTE = ("is an async def function: polybus calls plain functions, and its coroutine "
              "would never run (make it a def; asyncio.run(...) inside one runs a coroutine)")


GENERATOR_NOTE = ("is a generator function (it has yield): polybus calls the entrypoint and "
                  "shows what it returns, and a generator's body runs only as it is "
                  "iterated, so none of it would run (return a list of the values instead "
                  "of yielding them)")


def entry_note(fn: Any) -> str | None:
    """Why ``fn`` cannot be a client's entrypoint (ASYNC_NOTE, GENERATOR_NOTE), or None.
    Its call would give an object whose body never ran, shown as the run's result
    ('<generator object main ...>', status 0, no call made)."""
    if is_async(fn):
        return ASYNC_NOTE
    if inspect.isgeneratorfunction(fn):
        return GENERATOR_NOTE
    return None


def is_async(fn: Any) -> bool:
    """A coroutine or async generator function (polybus would call it and get an object
    that never runs)."""
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)


def _refused(name: str) -> Callable[..., Any]:
    """What a replica serves for an async def ``name``: each call fails with the reason
    (a module may hold async helpers it does not mean to serve, so it still starts)."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{name!r} {ASYNC_NOTE}")
    return refuse
