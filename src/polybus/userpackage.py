"""The package a user's module file sits in, if any: where its relative imports start.

A module file whose folder holds an ``__init__.py`` is part of a package: that folder,
and each folder above it that holds an ``__init__.py`` too, up to the top package
(``top.sub`` for ``top/sub/server.py``). polybus imports such a file as ``python -m
top.sub.server`` runs it: under a name of its own (usernames.py) but in that package,
so ``from .helpers import render`` imports ``top.sub.helpers`` and ``from ..util
import f`` imports ``top.util``. The top package imports by its name, from the folder
that holds it (`importable`), in every process that loads the module (a replica, a
process-pool child, the client, the import check), so a class of ``top.sub.helpers``
pickles by that name. That folder is not put on ``sys.path``: the name is found there
after the standard library and the installed packages (before any other folder on
``sys.path``), and no other file of the folder is found at all, so a program that ran
as a top-level module's runs as it did (a ``statistics.py`` script beside the package
is not the standard library's in its place). A relative import that climbs above the top package fails as Python fails it,
said with the file and line.

A file with no ``__init__.py`` beside it is a top-level module: only its own folder
goes on ``sys.path``, and a relative import in it fails (it has no package). A
package's own ``__init__.py`` given as a module's file is a package of its own under
the module's name, its relative imports from its folder.
"""

from __future__ import annotations

import keyword
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType

from polybus.ownfiles import is_library_file

__all__ = ["Package", "forget_packages", "importable", "package_of", "relative_import_hint"]

_BEYOND = "attempted relative import beyond top-level package"
_NO_PARENT = "attempted relative import with no known parent package"


@dataclass(frozen=True)
class Package:
    """The packages a module file is in, outermost first (each one's folder)."""

    folders: tuple[Path, ...]

    @property
    def name(self) -> str:
        """The dotted name of the innermost: the package its relative imports start in."""
        return ".".join(f.name for f in self.folders)

    @property
    def top(self) -> Path:
        """The top package's folder."""
        return self.folders[0]

    @property
    def root(self) -> Path:
        """The folder that holds the top package, where `importable` finds it."""
        return self.top.parent


def _is_package(folder: Path) -> bool:
    """A folder Python can import as a regular package: an ``__init__.py``, and a name
    an import statement can spell."""
    name = folder.name
    return (name.isidentifier() and not keyword.iskeyword(name)
            and (folder / "__init__.py").is_file())


def package_of(path: Path | str) -> Package | None:
    """The package the module file ``path`` is in; None for a top-level file (no
    ``__init__.py`` beside it) or a package's own ``__init__.py``."""
    p = Path(path).absolute()
    if p.name == "__init__.py":
        return None
    folders: list[Path] = []
    folder = p.parent
    while _is_package(folder):
        folders.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    return Package(tuple(reversed(folders))) if folders else None


class _TopPackages(MetaPathFinder):
    """A user's top package by its name, in the folder that holds it. Placed before the
    finder of ``sys.path``'s folders, it gives way to the standard library and the
    installed packages (a name of theirs stays theirs), not to the other folders on
    ``sys.path``: an earlier run's, in a process that runs several programs, may hold a
    package of the same name."""

    def __init__(self) -> None:
        self.roots: dict[str, str] = {}  # top package's name -> the folder that holds it

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        root = self.roots.get(fullname)
        if path is not None or root is None:  # (a submodule: found in its package)
            return None
        other = PathFinder.find_spec(fullname)
        if other is not None and is_library_file(_where(other)):
            return None
        return PathFinder.find_spec(fullname, [root])


def _where(spec: ModuleSpec) -> str:
    """The file of the module ``spec`` finds, or a folder of the namespace package."""
    if spec.origin is not None and spec.has_location:
        return spec.origin
    return next(iter(spec.submodule_search_locations or ()), "")


_FINDER = _TopPackages()


def forget_packages() -> None:
    """Earlier runs' top packages import by their names no more (a run's own are made
    `importable` again as its modules load): in a process that runs several programs,
    the next one's ``import shapes`` of a ``shapes`` package beside its client found the
    earlier one's, whose client was in its own ``shapes``."""
    _FINDER.roots.clear()


def importable(package: Package) -> None:
    """``package``'s top package imports by its name from now on in this process, from
    the folder that holds it (the latest one given for a name: a process that runs
    several programs, one after another), unless the standard library or an installed
    package has a module of that name."""
    _FINDER.roots[package.top.name] = str(package.root)
    if _FINDER not in sys.meta_path:
        at = sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else None
        sys.meta_path.insert(len(sys.meta_path) if at is None else at, _FINDER)


def relative_import_hint(exc: BaseException, path: Path, line_file: str | None) -> str | None:
    """What to do about ``exc``, an import's failure in the module file ``path`` itself
    (``line_file``: the file of the innermost frame of the user's), when it comes of the
    module's package (or its lack of one); else None."""
    if not isinstance(exc, ImportError) or line_file != str(path):
        return None
    package = package_of(path)
    if package is not None:
        other = _other_module(package)
        if other:
            return (f"a module {package.top.name!r} other than the package {package.top} "
                    f"was imported in this process already ({other}), and the "
                    f"package's imports go to it: give the folder another name")
    if type(exc) is ImportError and str(exc) == _BEYOND and package is not None:
        where = (f"the package of {path.name}, {package.name!r} ({package.top}), is a "
                 f"top-level one" if len(package.folders) == 1 else
                 f"{path.name} is in the package {package.name!r}, whose top package is "
                 f"{package.top.name!r} ({package.top})")
        above = (f"{package.root} has no __init__.py"
                 if not (package.root / "__init__.py").is_file()
                 else f"{package.root.name!r} is no name to import a package by")
        return f"{where}: a relative import climbs no higher ({above})"
    if type(exc) is ImportError and str(exc) == _NO_PARENT and package is None:
        if (path.parent / "__init__.py").is_file():  # (and a name no import can spell)
            return (f"{path.parent.name!r} is no name to import a package by, so "
                    f"{path.name} is not in a package: rename its folder")
        return (f"{path.parent} has no __init__.py, so {path.name} is not in a package: "
                f"add an __init__.py beside it to make its folder one, or import by the "
                f"plain name (`from helpers import ...`), its folder being first on "
                f"sys.path")
    return None


def _other_module(package: Package) -> str:
    """Where the module ``sys.modules`` holds under the top package's name comes from,
    when it is not that package (a module of the standard library or an installed one
    of that name, imported before the user's module); "" if it is, or if there is none."""
    module = sys.modules.get(package.top.name)
    if module is None:
        return ""
    paths = [str(Path(p)) for p in getattr(module, "__path__", None) or ()]
    if str(package.top) in paths:
        return ""
    return str(getattr(module, "__file__", None) or (paths[0] if paths else "built in"))
