"""A run in a process that lives on and runs several (a notebook's kernel, a service).

`ClientImports`: the modules a run's client imports from its own folder, as the files
are now. A run loads its client module afresh from its file, and its replicas are new
processes that import everything afresh; but a module the client imports (``import
common``, a ``common.py`` beside it) stays in ``sys.modules`` after its run, and the
next run's ``import common`` would get that copy: the old code of a helper edited
meanwhile (while the replicas ran the new one), or another project's ``common.py``. So
the modules a run imported from its client's folder are noted as it ends, and the next
run's client takes them afresh if any of their files has changed since, or if it is
another folder's client; else they are kept, the same modules, so a value of their
classes kept from one run still pickles in the next. Only source files of the user's
are taken so: not polybus's, nor an installed package's (a virtual environment inside
the project), nor a compiled extension, which cannot be imported twice.

`loop_note`: why a program fails that starts an event loop of its own (``asyncio.run``)
when `polybus.run` is called where one is running already (a notebook's cell).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from polybus.ownfiles import is_library_file, is_polybus_file
from polybus.usernames import PREFIX
from polybus.userpackage import forget_packages, package_of
from polybus.worker.module import forget_folders

__all__ = ["ClientImports", "loop_note"]

# Per client folder, the modules runs of it imported: name -> (module, its file's
# (mtime_ns, size) when its run ended).
_noted: dict[str, dict[str, tuple[ModuleType, tuple[int, int] | None]]] = {}
_lock = threading.Lock()


class ClientImports:
    """Made as a run starts, before its client module (and any module called in the
    client, ``replication = 0``) loads: the modules earlier runs
    imported from another folder, or from this one with a file changed since, are
    taken out of ``sys.modules`` (and the import system's folder listings refreshed:
    a file written a moment ago is found). `note` as the run ends."""

    def __init__(self, client_source: str | Path, served: Sequence[str | Path] = ()
                 ) -> None:
        self.folder = str(Path(client_source).resolve().parent)
        # (``served``: the files of modules with replication = 0, imported into the
        # client too: what they import from their folders is noted with the client's;
        # and for a module in a package, the folder that holds its top package)
        files = [Path(f).resolve() for f in (client_source, *served)]
        packages = [p for p in map(package_of, files) if p is not None]
        self.folders = tuple(dict.fromkeys(
            [self.folder, *(str(f.parent) for f in files[1:]),
             *(str(p.root) for p in packages)]))
        with _lock:
            for folder in list(_noted):
                modules = _noted[folder]
                if folder != self.folder or any(_stat(m) != st for m, st in modules.values()):
                    for name, (module, _) in modules.items():
                        _forget(name, module)
                    del _noted[folder]
        forget_folders()  # (an earlier run's folders lend this one no files,
        forget_packages()  # nor its packages their names)
        importlib.invalidate_caches()
        self.before = set(sys.modules)

    def note(self) -> None:
        """The modules this run imported from its client's folder, noted for the next."""
        inside = tuple(os.path.join(f, "") for f in self.folders)
        found = {}
        for name in set(sys.modules) - self.before:
            module = sys.modules.get(name)
            file = getattr(module, "__file__", None)
            if (module is None or not isinstance(file, str) or name.startswith(PREFIX)
                    or not file.endswith(".py") or not file.startswith(inside)
                    or is_polybus_file(file) or is_library_file(file)):
                continue
            found[name] = (module, _stat(module))
        if found:
            with _lock:
                _noted.setdefault(self.folder, {}).update(found)


def _forget(name: str, module: ModuleType) -> None:
    """``module`` out of ``sys.modules``, and out of its package's attributes if the
    package stays: ``from helpers import common`` takes the attribute when there is one,
    and a folder without ``__init__.py`` (a namespace package) has no file to be noted
    by, so it stays, holding the old module."""
    if sys.modules.get(name) is module:
        del sys.modules[name]
    parent, _, child = name.rpartition(".")
    package = sys.modules.get(parent) if parent else None
    if package is not None and getattr(package, child, None) is module:
        try:
            delattr(package, child)
        except (AttributeError, TypeError):  # (a package that refuses it: left as it is)
            pass


def _stat(module: ModuleType) -> tuple[int, int] | None:
    """Its file's modification time and size; None if it is gone."""
    try:
        st = os.stat(str(module.__file__))
    except (OSError, TypeError):
        return None
    return st.st_mtime_ns, st.st_size


def loop_note(exc: BaseException) -> None:
    """A note on ``exc``, the program's, if it is an event loop's refusal (``asyncio.run()
    cannot be called from a running event loop``, ``This event loop is already
    running``) and this thread runs one: the caller's, not the program's doing."""
    if not isinstance(exc, RuntimeError) or "event loop" not in str(exc):
        return
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    exc.add_note("polybus.run was called in a thread whose asyncio event loop is running "
                 "(a notebook's kernel runs one), where the program cannot run an event "
                 "loop of its own as under `polybus run`: call it from a thread with none, "
                 "`await asyncio.to_thread(polybus.run, ...)` (with no timeout=, which "
                 "needs the main thread), or run `polybus run` in a subprocess")
