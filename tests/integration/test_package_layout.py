"""A program laid out as a package: a served module and a client module whose folders
hold an ``__init__.py`` import their helpers relatively (``from .helpers import twice``,
``from ..geometry import Square``), as ``python -m shapes.client`` would run them, in a
replica, its process pool's children and the client alike; ``polybus check`` and
``polybus run`` agree. A relative import above the top package fails both, saying the
file and line. (Before: every relative import failed at run, "attempted relative import
with no known parent package", while ``check --no-import`` accepted it.)"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli

FILES = {
    "shapes/__init__.py": "",
    "shapes/geometry.py": """\
        NAME = {name!r}


        class Square:
            def __init__(self, side):
                self.side = side


        def area_of(square):
            return square.side ** 2
    """,
    "shapes/serve/__init__.py": "",
    "shapes/serve/helpers.py": "def twice(x):\n    return 2 * x\n",
    "shapes/serve/server.py": """\
        import os

        from ..geometry import NAME, Square, area_of
        from .helpers import twice


        class Refused(Exception):
            pass


        def area(square):
            return twice(area_of(square)), os.getpid()


        def make(side):
            return Square(side)


        def refuse(x):
            raise Refused(f"not {x}")


        def name():
            return NAME
    """,
    "shapes/serve/client.py": """\
        import os

        from polybus import use
        from polybus.errors import RemoteException

        from ..geometry import NAME, Square
        from .helpers import twice

        area, make, refuse, name = use("area"), use("make"), use("refuse"), use("name")


        def main():
            made = make(3)
            doubled, pids = zip(*(area(Square(s)) for s in (1, 2, 3)))
            try:
                refuse(1)
            except RemoteException as e:
                refused = (e.remote_type, e.remote_message)
            return {"made": (type(made).__module__, isinstance(made, Square), made.side),
                    "areas": list(doubled), "twice": twice(2),
                    "in_children": os.getpid() not in pids and os.getppid() not in pids,
                    "refused": refused, "names": (NAME, name())}
    """,
    "app.toml": """\
        [modules.server]
        source = "shapes/serve/server.py"
        replication = 1
        pickle = true
        define.area = { pool = "processes:2" }
        define.refuse = { pool = "processes:2" }
        define.make = {}
        define.name = {}

        [modules.client]
        source = "shapes/serve/client.py"
        entrypoint = "main"
        pickle = true

        [bind]
        "client.area" = "server.area"
        "client.make" = "server.make"
        "client.refuse" = "server.refuse"
        "client.name" = "server.name"
    """,
}


@pytest.fixture(autouse=True)
def _import_state_put_back(tmp_path: Path) -> Iterator[None]:
    """A run in this process leaves its modules' folders on sys.path, its package's
    finder on sys.meta_path and its helpers in sys.modules, as a notebook's kernel
    keeps them: put back, so that no later test in this process imports a
    ``helpers.py`` of these programs in place of its own."""
    path, finders, names = list(sys.path), list(sys.meta_path), set(sys.modules)
    yield
    sys.path[:], sys.meta_path[:] = path, finders
    for name in set(sys.modules) - names:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write_program(where: Path, name: str = "one", **changed: str) -> Path:
    for file, text in {**FILES, **changed}.items():
        path = where / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).replace("{name!r}", repr(name)))
    return where / "app.toml"


@pytest.mark.timeout(120)
def test_a_package_layout_runs_with_relative_imports_everywhere(
        tmp_path: Path, no_worker_left: None) -> None:
    r = polybus.run(write_program(tmp_path), worker_output=False)
    assert r.result == {
        # a class of the package pickles by its name, both ways (pickle = true)
        "made": ("shapes.geometry", True, 3), "areas": [2, 8, 18], "twice": 4,
        "in_children": True,  # (each area call ran in a child of the replica)
        # (an exception class of the served module, from a child, under the module's
        # name as the replica imported it: the child imported it under the same name)
        "refused": ("server.Refused", "not 1"), "names": ("one", "one")}


@pytest.mark.filterwarnings("ignore:.*is ignored. module 'server' has replication = 0")
def test_a_module_called_in_the_client_is_imported_in_its_package(tmp_path: Path) -> None:
    """``replication = 0``: the served module imported into the client process, as a
    replica imports it (its pool and pickle keys said to be ignored)."""
    r = polybus.run(write_program(tmp_path), {"modules.server.replication": 0})
    assert r.result["areas"] == [2, 8, 18] and r.result["in_children"] is False
    assert r.result["refused"] == ("server.Refused", "not 1")


@pytest.mark.timeout(120)
def test_check_and_run_accept_the_package_layout(tmp_path: Path) -> None:
    write_program(tmp_path)
    check = cli("check", "app.toml", cwd=tmp_path)
    assert check.returncode == 0 and "app.toml: ok" in check.stdout, check.stderr
    run = cli("run", "app.toml", "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "'areas': [2, 8, 18]" in run.stdout and "'server.Refused'" in run.stdout


@pytest.mark.timeout(120)
def test_two_projects_with_one_package_name_each_run_their_own_in_one_process(
        tmp_path: Path, no_worker_left: None) -> None:
    """A process that runs several programs (a notebook's kernel): the second project's
    ``shapes`` is its own at the client, not the first one's kept in ``sys.modules``,
    though the client imports it from above its own folder."""
    first = write_program(tmp_path / "a", name="first")
    second = write_program(tmp_path / "b", name="second")
    assert polybus.run(first, worker_output=False).result["names"] == ("first", "first")
    assert polybus.run(second, worker_output=False).result["names"] == ("second", "second")


CLIMB = "from ...outside import f\n"  # (in shapes.serve, ``...`` is above shapes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", ["server", "client"])
def test_a_relative_import_above_the_top_package_fails_check_and_run_alike(
        tmp_path: Path, key: str) -> None:
    source = f"shapes/serve/{key}.py"
    write_program(tmp_path, **{source: CLIMB + textwrap.dedent(FILES[source])})
    (tmp_path / "outside.py").write_text("def f():\n    pass\n")
    said = (f"module {key!r} ({source}) failed to import: ImportError: attempted "
            f"relative import beyond top-level package at line 1 ({key}.py is in the "
            f"package 'shapes.serve', whose top package is 'shapes' "
            f"({tmp_path.resolve() / 'shapes'}): a relative import climbs no higher "
            f"({tmp_path.resolve()} has no __init__.py)")
    check = cli("check", "app.toml", cwd=tmp_path)
    assert check.returncode == 2 and said in check.stderr, check.stderr
    assert f'{key}.py", line 1, in <module>' in check.stderr
    run = cli("run", "app.toml", cwd=tmp_path)
    assert run.returncode == 2 and said in run.stderr, run.stderr
    assert os.path.join("shapes", "serve", f"{key}.py") in run.stderr


@pytest.mark.timeout(120)
def test_a_file_beside_the_package_named_as_a_standard_module_is_not_imported_for_it(
        tmp_path: Path, no_worker_left: None) -> None:
    """A program that ran before modules in packages were imported in them: a script of
    the project's beside the package, named as a module of the standard library, is not
    what the replica's ``import statistics`` finds (only the package imports by its name
    from that folder), and ``check`` and ``run`` agree."""
    server = "shapes/serve/server.py"
    write_program(tmp_path, **{server: textwrap.dedent(FILES[server]).replace(
        "return NAME", "import statistics\n    return NAME, statistics.mean([1, 3])")})
    (tmp_path / "statistics.py").write_text("print('a script of the project')\n")
    r = polybus.run(tmp_path / "app.toml", worker_output=False)
    assert r.result["names"] == ("one", ["one", 2])
    check = cli("check", tmp_path / "app.toml", cwd=tmp_path / "shapes")
    assert check.returncode == 0 and "app.toml: ok" in check.stdout, check.stderr


@pytest.mark.timeout(120)
def test_a_package_is_its_own_after_a_run_that_imported_another_of_its_name(
        tmp_path: Path, no_worker_left: None) -> None:
    """A process that runs several programs: the first one's client beside its ``shapes``
    package (its folder stays on sys.path), the second one's in a ``shapes`` package of
    its own: the second run's package is its own, though an earlier folder on sys.path
    holds one of its name."""
    first = write_program(tmp_path / "a", name="first")
    client = textwrap.dedent(FILES["shapes/serve/client.py"]).replace(
        "from ..geometry", "from shapes.geometry").replace(
        "from .helpers", "from shapes.serve.helpers")
    (tmp_path / "a" / "client.py").write_text(client)
    first.write_text(first.read_text().replace('"shapes/serve/client.py"', '"client.py"'))
    second = write_program(tmp_path / "b", name="second")
    assert polybus.run(first, worker_output=False).result["names"] == ("first", "first")
    assert polybus.run(second, worker_output=False).result["names"] == ("second", "second")


@pytest.mark.timeout(120)
def test_a_later_run_imports_its_own_package_not_one_an_earlier_run_imported_in_one(
        tmp_path: Path, no_worker_left: None) -> None:
    """A process that runs several programs: the first one's client is in its ``shapes``
    package (so that package imports by its name from the first one's folder), the
    second one's client beside a ``shapes`` package of its own, imported from its own
    folder (an absolute import): the second gets its own, not the first one's."""
    first = write_program(tmp_path / "a", name="first")
    second = write_program(tmp_path / "b", name="second")
    client = textwrap.dedent(FILES["shapes/serve/client.py"]).replace(
        "from ..geometry", "from shapes.geometry").replace(
        "from .helpers", "from shapes.serve.helpers")
    (tmp_path / "b" / "client.py").write_text(client)
    second.write_text(second.read_text().replace('"shapes/serve/client.py"', '"client.py"'))
    assert polybus.run(first, worker_output=False).result["names"] == ("first", "first")
    assert polybus.run(second, worker_output=False).result["names"] == ("second", "second")
