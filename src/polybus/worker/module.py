"""Loading a user's module from its file, and the interfaces it serves."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from polybus.errors import ConfigError
from polybus.plural import with_article
from polybus.usernames import key_of
from polybus.userpackage import importable, package_of

# Folders load_module put on sys.path that were not on it before (`forget_folders`)
_added: set[str] = set()


def forget_folders() -> None:
    """Take the folders earlier `load_module` calls put on sys.path off it again (those
    that were on it before stay): in a process that runs several programs one after
    another (polybus.run), an earlier program's folder lent the next its files, a
    ``helpers.py`` there in place of the next one's ``helpers/`` folder with no
    ``__init__.py`` (a module file wins over such a folder wherever it is on the
    path). The next run's `load_module` puts its own folders back first."""
    while _added:
        folder = _added.pop()
        while folder in sys.path:
            sys.path.remove(folder)


def load_module(path: Path | str, name: str | None = None) -> ModuleType:
    """Import a module from its file; its folder goes first on sys.path for its own
    imports (moved there if it was on it already: in a process that runs several
    programs, an earlier one's folder must not hold a same-named file in its place).
    A file in a package (userpackage.py) is imported in it, as ``python -m pkg.server``
    runs it, under ``name`` still: its relative imports work, and its top package
    imports by its name."""
    p = Path(path).resolve()
    if not p.is_file():
        raise ConfigError(f"module source {p} does not exist")
    folder = str(p.parent)
    if folder in sys.path:
        sys.path.remove(folder)
    else:
        _added.add(folder)
    sys.path.insert(0, folder)
    mod_name = name or p.stem
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {p}")
    loader = spec.loader
    package = package_of(p)
    if package is not None:
        importable(package)
        spec = _in_package(spec, f"{package.name}.{p.stem}")
    module = importlib.util.module_from_spec(spec)
    module.__name__ = mod_name  # (a package's module: its spec has the dotted name)
    sys.modules[mod_name] = module
    try:
        with _ctrl_c_noted() as ctrl_c:
            loader.exec_module(module)
    except BaseException as exc:  # the user's mistake: name their file and line
        sys.modules.pop(mod_name, None)
        if isinstance(exc, KeyboardInterrupt) and (ctrl_c or type(exc) is not KeyboardInterrupt):
            raise  # (a Ctrl-C meanwhile, or polybus's own: --timeout, SIGTERM)
        from polybus.usercode import import_failure

        raise import_failure(exc, key_of(mod_name), p) from None
    return module


def _in_package(spec: ModuleSpec, dotted: str) -> ModuleSpec:
    """``spec``'s file and loader under the name ``dotted`` (``pkg.server``), whose
    parent is the module's ``__package__``: where its relative imports start, as for
    ``python -m pkg.server``. The loader keeps the name it was made with, the one the
    module runs under (it reads the module's code by that name)."""
    inner = ModuleSpec(dotted, spec.loader, origin=spec.origin)
    inner.has_location = True  # (``__file__`` and ``__cached__``, as for any file's)
    return inner


@contextlib.contextmanager
def _ctrl_c_noted() -> Iterator[list[int]]:
    """Notes a Ctrl-C (SIGINT, Python's own handling of it) while a module imports: a
    KeyboardInterrupt the module raises itself (``raise KeyboardInterrupt`` at its top)
    is its failure to import, said with its file and line as any exception's, while a
    Ctrl-C meanwhile stops the command as Ctrl-C does. (Outside the main thread, or
    with SIGINT handled otherwise, nothing is noted: no Ctrl-C comes there as a plain
    KeyboardInterrupt, or it is ignored, as in a run's workers.)"""
    noted: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield noted
        return

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        if signal.getsignal(signal.SIGINT) is note:  # (else the module set its own)
            signal.signal(signal.SIGINT, signal.default_int_handler)


def interfaces(module: ModuleType, names: Iterable[str] = ()) -> dict[str, Callable[..., Any]]:
    """``names`` if given, else every public function defined in the module itself."""
    wanted = list(names)
    if wanted:
        out = {}
        for n in wanted:
            what = not_callable(module, n)
            if what is not None:
                raise ConfigError(f"{module.__file__}: {n!r}, which the configuration "
                                  f"names, is {what} once the module is imported")
            fn = getattr(module, n)
            out[n] = _refused(n) if is_async(fn) else fn
        return out
    return {n: (_refused(n) if is_async(f) else f) for n, f in vars(module).items()
            if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == module.__name__}


def not_callable(module: ModuleType, name: str) -> str | None:
    """What the attribute ``name`` of ``module`` is, when it is not callable: "missing",
    "an int, not a function", "the module numpy, not a function"; None if it is."""
    if not hasattr(module, name):
        return "missing"
    value = getattr(module, name)
    if callable(value):
        return None
    if value is None:
        return "None, not a function"
    if isinstance(value, ModuleType):
        return f"the module {value.__name__}, not a function"
    return f"{with_article(type(value).__name__)}, not a function"


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
    """A coroutine or async generator function, or an instance whose ``__call__`` is one
    (polybus would call it and get an object that never runs)."""
    instance = callable(fn) and not (inspect.isroutine(fn) or inspect.isclass(fn))
    call = inspect.getattr_static(type(fn), "__call__", None) if instance else None
    return any(inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f)
               for f in (fn, call))


def _refused(name: str) -> Callable[..., Any]:
    """What a replica serves for an async def ``name``: each call fails with the reason
    (a module may hold async helpers it does not mean to serve, so it still starts)."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{name!r} {ASYNC_NOTE}")
    return refuse
