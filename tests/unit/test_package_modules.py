"""A module file in a package (userpackage.py, worker/module.py): imported in its package,
as ``python -m pkg.server`` runs it, so its relative imports work; a top-level file is
imported as before; a relative import that cannot work says why, with file and line."""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.errors import ModuleImportError
from polybus.userpackage import package_of
from polybus.worker.module import load_module

NAME = "polybus_user_srv"
TOPS = ("relshapes", "json", "colorsys")  # (the packages these tests write)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    before, finders = list(sys.path), list(sys.meta_path)
    kept = {n: m for n, m in sys.modules.items() if n.partition(".")[0] in TOPS}
    names = set(sys.modules)
    yield tmp_path.resolve()
    # (load_module puts the module's folder on sys.path, and its top package's finder
    # on sys.meta_path; every module imported from the test's files goes, a helpers.py
    # too: a later test's ``import helpers`` must not find it)
    sys.path[:], sys.meta_path[:] = before, finders
    for name in set(sys.modules) - names:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if name == NAME or name.partition(".")[0] in TOPS or file.startswith(str(tmp_path)):
            del sys.modules[name]
    sys.modules.update(kept)  # (the standard library's json, left as it was)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


GEOMETRY = "class Square:\n    def __init__(self, side):\n        self.side = side\n"
SERVER = """\
from ..geometry import Square
from .helpers import twice


class Local:
    pass


def area(side):
    return twice(Square(side).side ** 2) // 2
"""


def nested(root: Path) -> Path:
    """relshapes/serve/server.py, in the package relshapes.serve."""
    write(root, {"relshapes/__init__.py": "", "relshapes/geometry.py": GEOMETRY,
                 "relshapes/serve/__init__.py": "",
                 "relshapes/serve/helpers.py": "def twice(x):\n    return 2 * x\n",
                 "relshapes/serve/server.py": SERVER})
    return root / "relshapes" / "serve" / "server.py"


def test_the_package_of_a_file_is_the_folders_with_an_init_above_it(folder: Path) -> None:
    src = nested(folder)
    package = package_of(src)
    assert package is not None and package.name == "relshapes.serve"
    assert (package.top, package.root) == (folder / "relshapes", folder)
    write(folder, {"plain/server.py": "", "my-pkg/__init__.py": "", "my-pkg/server.py": "",
                   "my-top/__init__.py": "", "my-top/inner/__init__.py": "",
                   "my-top/inner/server.py": ""})
    assert package_of(folder / "plain" / "server.py") is None
    assert package_of(folder / "my-pkg" / "server.py") is None  # (no import spells it)
    inner = package_of(folder / "my-top" / "inner" / "server.py")
    assert inner is not None and inner.name == "inner"
    # (a package's own __init__.py is a package of its own, as before)
    assert package_of(folder / "relshapes" / "__init__.py") is None


def test_a_module_in_a_package_imports_relatively_under_its_own_name(folder: Path) -> None:
    src = nested(folder)
    module = load_module(src, NAME)
    assert module.area(3) == 9
    assert (module.__name__, module.__package__) == (NAME, "relshapes.serve")
    assert module.__file__ == str(src) and sys.modules[NAME] is module
    # its folder first on sys.path, as for any module; the top package imports by its
    # name (found in the folder that holds it, which is not put on sys.path)
    assert sys.path[0] == str(src.parent) and str(folder) not in sys.path
    assert sys.modules["relshapes"].__file__ == str(folder / "relshapes" / "__init__.py")
    assert module.Square.__module__ == "relshapes.geometry"
    # a class of the module itself pickles by the name the module is imported under
    assert module.Local.__module__ == NAME
    assert type(pickle.loads(pickle.dumps(module.Local()))) is module.Local


def test_a_top_level_file_is_imported_as_before(folder: Path) -> None:
    # (a name no other test's program imports: one left in sys.modules would be taken)
    write(folder, {"server.py": "import relplainhelpers\n\ndef f():\n"
                                "    return relplainhelpers.X\n",
                   "relplainhelpers.py": "X = 1\n"})
    rest = [p for p in sys.path if p != str(folder)]
    module = load_module(folder / "server.py", NAME)
    assert module.f() == 1 and sys.path == [str(folder), *rest]
    assert (module.__package__, module.__spec__.name) == ("", NAME)


def test_a_file_of_an_installed_package_leaves_the_import_path_as_it_is(
        folder: Path) -> None:
    """polybus's own benchmark programs are in its package: it imports by its name
    already, and the folder that holds it is not put before the standard library."""
    from polybus.bench import programs

    src = Path(programs.__file__).resolve().parent / "echo_server.py"
    rest = [p for p in sys.path if p != str(src.parent)]
    module = load_module(src, NAME)
    assert module.__package__ == "polybus.bench.programs" and module.noop(3) == 3
    assert sys.path == [str(src.parent), *rest]


def failure(path: Path) -> ModuleImportError:
    with pytest.raises(ModuleImportError) as e:
        load_module(path, NAME)
    assert NAME not in sys.modules
    return e.value


@pytest.mark.parametrize(("server", "said"), [
    ("relshapes/server.py", "the package of server.py, 'relshapes' ({top}), is a "
     "top-level one: a relative import climbs no higher ({root} has no __init__.py)"),
    ("relshapes/serve/server.py", "server.py is in the package 'relshapes.serve', whose "
     "top package is 'relshapes' ({top}): a relative import climbs no higher ({root} has "
     "no __init__.py)"),
], ids=["top-level-package", "nested-package"])
def test_a_relative_import_above_the_top_package_names_file_line_and_why(
        folder: Path, server: str, said: str) -> None:
    nested(folder)
    dots = "." * (server.count("/") + 1)
    write(folder, {server: f"import os\nfrom {dots}outside import f\n"})
    e = failure(folder / server)
    assert (e.module, e.file, e.line) == ("srv", str(folder / server), 2)
    assert ("ImportError: attempted relative import beyond top-level package at line 2 ("
            + said.format(top=folder / "relshapes", root=folder) + ")") in str(e)
    assert f"from {dots}outside import f" in str(e)  # (its line, as the traceback shows)


def test_a_relative_import_in_a_top_level_file_says_to_make_its_folder_a_package(
        folder: Path) -> None:
    write(folder, {"app/server.py": "from .helpers import f\n", "app/helpers.py": ""})
    e = failure(folder / "app" / "server.py")
    assert "attempted relative import with no known parent package at line 1 (" in str(e)
    assert f"{folder / 'app'} has no __init__.py, so server.py is not in a package" in str(e)


def test_a_package_named_as_a_module_imported_already_says_to_rename_it(
        folder: Path) -> None:
    """``json`` is imported already (polybus uses it): ``from .helpers`` would import
    ``json.helpers``, from the standard library's package."""
    write(folder, {"json/__init__.py": "", "json/helpers.py": "def f():\n    pass\n",
                   "json/server.py": "from .helpers import f\n"})
    e = failure(folder / "json" / "server.py")
    assert "No module named 'json.helpers' at line 1" in str(e)
    assert (f"a module 'json' other than the package {folder / 'json'} was imported in "
            "this process already") in str(e) and "give the folder another name" in str(e)


def test_the_folder_that_holds_the_package_lends_it_no_other_name(folder: Path) -> None:
    """Only the top package imports by its name from the folder that holds it, and only
    where no module of the standard library or an installed package has that name: a
    file beside the package (a script of the project's, named as a module of the
    standard library) and a package named as a module of the standard library not
    imported yet stay out of that module's way, as for a top-level module's file.
    (Before, that folder went on sys.path ahead of the standard library.)"""
    nested(folder)
    write(folder, {"relsibling.py": "", "colorsys/__init__.py": "",
                   "colorsys/server.py": "def f():\n    return 1\n"})
    module = load_module(folder / "relshapes" / "serve" / "server.py", NAME)
    assert module.area(3) == 9  # (its relative imports: relshapes by its name)
    assert importlib.util.find_spec("relsibling") is None
    sys.modules.pop("colorsys", None)  # (not imported yet: restored by the fixture)
    assert load_module(folder / "colorsys" / "server.py", NAME).f() == 1
    colorsys = importlib.import_module("colorsys")
    assert colorsys.__file__ != str(folder / "colorsys" / "__init__.py")
    assert colorsys.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
