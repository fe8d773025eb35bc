"""The static reading of a served module's names that are not its own ``def``s
(config/boundnames.py, `SourceInfo.function` and `servable`): an import is followed to
the ``def`` of the program it leads to; anything else the source cannot show is served
unread; a module or a literal is known not to be a function."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from polybus.client.params import parameters
from polybus.config.source import SourceInfo, inspect_source
from polybus.errors import ConfigError

HELPERS = """\
import math


def render(tile, gain=1.0, *, quality="low"):
    \"\"\"Render a tile.\"\"\"
    return tile * gain
"""


def _read(where: Path, server: str, **files: str) -> SourceInfo:
    for name, text in files.items():
        path = where / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    where.mkdir(parents=True, exist_ok=True)
    (where / "server.py").write_text(textwrap.dedent(server))
    return inspect_source(where / "server.py", client=False)


def test_an_imported_function_is_read_from_the_file_that_defines_it(tmp_path: Path) -> None:
    info = _read(tmp_path, "from helpers import render\n", **{"helpers.py": HELPERS})
    fn = info.function("render")
    assert fn is not None and fn.file == tmp_path / "helpers.py"
    assert (fn.lineno, fn.params, fn.required) == (4, ("tile", "gain", "quality"), ("tile",))
    assert fn.signature == "render(tile, gain=1.0, *, quality='low')"
    assert info.file_of(fn) == tmp_path / "helpers.py" and info.servable("render")
    assert "render" not in info.public()  # (not served unless something names it)
    assert parameters(tmp_path / "server.py", "render").keyword_only == ("quality",)


def test_an_alias_a_package_and_a_chain_of_re_exports_are_followed(tmp_path: Path) -> None:
    info = _read(tmp_path, """\
        from lib.api import render as draw
        from lib import tools
    """, **{"lib/__init__.py": "", "lib/api.py": "from .impl import render\n",
            "lib/impl.py": "from lib.deep.core import render\n",
            "lib/deep/__init__.py": "", "lib/deep/core.py": HELPERS})
    fn = info.function("draw")
    assert fn is not None and fn.file == tmp_path / "lib" / "deep" / "core.py"
    assert fn.name == "render" and fn.params == ("tile", "gain", "quality")
    # (``from lib import tools``: a module or a name of the package; not followed)
    assert info.function("tools") is None and info.servable("tools")


def test_what_the_source_cannot_show_is_served_unread(tmp_path: Path) -> None:
    info = _read(tmp_path, """\
        import functools
        from math import sqrt
        from helpers import helper, twice, missing_here
        from nowhere import gone

        def _scale(x, k):
            return x * k

        double = functools.partial(_scale, k=2)

        class Counter:
            def __call__(self, x):
                return x + 1

        count = Counter()
        try:
            from fast import kernel
        except ImportError:
            from slow import kernel
    """, **{"helpers.py": "helper = print\ntwice = 1\ntwice = 2\n"})
    for name in ("sqrt", "double", "Counter", "count", "kernel", "helper", "twice",
                 "missing_here", "gone"):
        assert info.function(name) is None, name
        assert info.servable(name), name
    assert info.others["double"].lineno == 9
    assert info.others["double"].text == "double = functools.partial(_scale, k=2)"
    assert info.others["kernel"].kind == ""


def test_a_module_or_a_literal_is_known_not_to_be_a_function(tmp_path: Path) -> None:
    info = _read(tmp_path, """\
        import numpy as np
        import os.path
        SIZE = 3
        NAME: str = "x"
        LABEL = f"{SIZE}"
        NOTHING = None
        TABLE = {"a": 1}
    """)
    kinds = {n: (info.servable(n), info.others[n].kind) for n in info.others}
    assert kinds == {"np": (False, "a module"), "os": (False, "a module"),
                     "SIZE": (False, "an int"), "NAME": (False, "a str"),
                     "LABEL": (False, "a str"), "NOTHING": (False, "None"),
                     "TABLE": (False, "a dict")}
    assert not info.servable("nowhere")  # (bound by nothing)


def test_a_module_that_may_bind_names_unseen_serves_any_name_unread(tmp_path: Path) -> None:
    star = _read(tmp_path, "from helpers import *\n", **{"helpers.py": HELPERS})
    assert star.open_names and star.servable("render") and star.function("render") is None
    dynamic = _read(tmp_path / "d", "globals()['render'] = len\n")
    assert dynamic.open_names and dynamic.servable("render")


def test_an_import_cycle_or_a_rebound_def_is_not_followed(tmp_path: Path) -> None:
    info = _read(tmp_path, "from a import f\nfrom c import g\n", **{
        "a.py": "from b import f\n", "b.py": "from a import f\n",
        "c.py": "def g(x):\n    return x\n\n\ng = print\n"})
    assert info.function("f") is None and info.servable("f")
    assert info.function("g") is None and info.servable("g")


def test_a_package_is_followed_before_a_module_of_the_same_name(tmp_path: Path) -> None:
    """Python imports ``helpers/__init__.py`` when ``helpers.py`` sits beside it (a
    package comes first in a folder of the import path): its ``def`` is the one read."""
    info = _read(tmp_path, "from helpers import render\n", **{
        "helpers.py": "def render(a, b):\n    return a\n", "helpers/__init__.py": HELPERS})
    fn = info.function("render")
    assert fn is not None and fn.file == tmp_path / "helpers" / "__init__.py"


def test_a_relative_import_is_not_followed_out_of_the_program(tmp_path: Path) -> None:
    """A relative import that climbs above the served module's folder (which fails when
    the module is imported) reads no file outside the program."""
    (tmp_path / "outside.py").write_text(HELPERS)
    info = _read(tmp_path / "app", "from ..outside import render\nfrom lib.a import f\n",
                 **{"lib/__init__.py": "", "lib/a.py": "from ...outside import render as f\n"})
    for name in ("render", "f"):
        assert info.function(name) is None and info.servable(name), name


def test_a_helper_nested_too_deep_to_walk_is_not_followed(tmp_path: Path) -> None:
    """A helper module that parses but is nested too deep for the walk of its names
    (an attribute chain 600 long) is left unread, not a traceback of ``check``."""
    deep = "x = a" + ".b" * 600 + "\n" + HELPERS
    info = _read(tmp_path, "from helpers import render\n", **{"helpers.py": deep})
    assert info.function("render") is None and info.servable("render")


def test_a_module_nested_too_deep_to_walk_is_said_not_a_traceback(tmp_path: Path) -> None:
    """The served (or client) module itself nested too deep for the walk of its names:
    a ConfigError as for one too deep to parse, not a RecursionError out of ``check``."""
    with pytest.raises(ConfigError) as e:
        _read(tmp_path, "x = a" + ".b" * 600 + "\n")
    assert str(e.value).endswith("server.py' cannot be parsed: RecursionError"), e.value


def test_a_name_bound_again_is_said_with_the_statement_that_binds_it_last(
        tmp_path: Path) -> None:
    """``render = functools.lru_cache(render)`` after the import is what a replica
    serves: the note's statement and line are that one, not the import's."""
    info = _read(tmp_path, """\
        import functools
        from helpers import render
        render = functools.lru_cache(render)
    """, **{"helpers.py": HELPERS})
    assert info.function("render") is None and info.servable("render")
    assert (info.others["render"].lineno, info.others["render"].text) == (
        3, "render = functools.lru_cache(render)")


def test_a_statement_too_deep_to_write_out_is_said_shortly(tmp_path: Path) -> None:
    """A served name bound by a statement that parses and walks but is nested too deep
    for ``ast.unparse`` (400 minus signs): its text is short, not a RecursionError."""
    info = _read(tmp_path, "x = " + "- " * 400 + "len\n")
    assert info.servable("x") and info.others["x"].text == "x = ..."


def test_a_served_module_in_a_package_follows_its_relative_imports(tmp_path: Path) -> None:
    """As the module is imported (userpackage.py): in its package, so ``..`` climbs to
    the top package and no higher; an absolute import finds the top package by its name
    in the folder that holds it, and nothing else there (that folder is not on the
    import path: ``from outside import`` fails at the run, and is not followed)."""
    info = _read(tmp_path / "top" / "serve", """\
        from ..geometry import render
        from .helpers import render as twice
        from top.geometry import render as again
        from ...outside import render as above
        from outside import render as beside
    """, **{"../__init__.py": "", "__init__.py": "", "../geometry.py": HELPERS,
            "helpers.py": "from ..geometry import render\n",
            "../../outside.py": HELPERS})
    geometry = tmp_path / "top" / "geometry.py"
    for name in ("render", "twice", "again"):
        fn = info.function(name)
        assert fn is not None and fn.file is not None, name
        assert fn.file == geometry and fn.lineno == 4, name
    for name in ("above", "beside"):
        assert info.function(name) is None and info.servable(name), name


def test_a_relative_import_of_a_file_in_no_package_is_not_followed(tmp_path: Path) -> None:
    """It fails when the module is imported (no parent package): the check of the
    import says so, and nothing is read from a file the run would never import."""
    info = _read(tmp_path, "from .helpers import render\n", **{"helpers.py": HELPERS})
    assert info.function("render") is None and info.servable("render")
    # (a package's own __init__.py is imported as a package: its relative imports work)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helpers.py").write_text(HELPERS)
    (tmp_path / "lib" / "__init__.py").write_text("from .helpers import render\n")
    init = inspect_source(tmp_path / "lib" / "__init__.py", client=False)
    fn = init.function("render")
    assert fn is not None and fn.file == tmp_path / "lib" / "helpers.py"
