"""The modules a client imports from its own folder, across runs in one process (a
notebook's kernel): a run imports them as its replicas do, from the files as they are
now. Before: the first run's copies stayed in ``sys.modules``, so a helper edited
between two runs was the old one at the client (the replicas, new processes, had the
new one), and a second project's ``common.py`` was the first project's. A helper left
unchanged is the same module in the next run of its project: a value of its class kept
from one run still goes to the next one's calls."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_bound_app

SERVER = """
    import common

    def tag(x):
        return common.NAME, x
"""

CLIENT = """
    import common
    from polybus import use

    tag = use("tag")

    def main(x=0):
        return common.NAME, tag(x)[0]      # the client's copy and a replica's
"""



def _project(where: Path, name: str) -> Path:
    app = write_bound_app(where, server=SERVER, client=CLIENT, names=("tag",))
    (where / "common.py").write_text(f"NAME = {name!r}\n")
    return app


@pytest.mark.timeout(120)
def test_a_helper_edited_between_two_runs_is_the_new_one_at_the_client(
        tmp_path: Path, no_worker_left: None) -> None:
    app = _project(tmp_path, "before")
    assert polybus.run(app, worker_output=False).result == ("before", "before")
    (tmp_path / "common.py").write_text("NAME = 'after the edit'\n")
    assert polybus.run(app, worker_output=False).result == ("after the edit",
                                                            "after the edit")


INDIRECT_CLIENT = """
    import util                            # which took NAME from common
    from polybus import use

    tag = use("tag")

    def main():
        return util.NAME, tag(0)[0]
"""


@pytest.mark.timeout(120)
def test_a_module_that_took_a_name_from_an_edited_helper_is_taken_afresh_too(
        tmp_path: Path, no_worker_left: None) -> None:
    app = write_bound_app(tmp_path, server=SERVER, client=INDIRECT_CLIENT, names=("tag",))
    (tmp_path / "util.py").write_text("from common import NAME\n")
    (tmp_path / "common.py").write_text("NAME = 'before'\n")
    assert polybus.run(app, worker_output=False).result == ("before", "before")
    (tmp_path / "common.py").write_text("NAME = 'after the edit'\n")
    assert polybus.run(app, worker_output=False).result == ("after the edit",
                                                            "after the edit")


@pytest.mark.timeout(180)
def test_two_projects_each_import_their_own_helper_of_the_same_name(
        tmp_path: Path, no_worker_left: None) -> None:
    a = _project(tmp_path / "a", "project a")
    b = _project(tmp_path / "b", "project b")
    assert polybus.run(a, worker_output=False).result == ("project a", "project a")
    assert polybus.run(b, worker_output=False).result == ("project b", "project b")
    assert polybus.run(a, worker_output=False).result == ("project a", "project a")


KEEP_CLIENT = """
    import common
    import embedded_imports_kept as kept
    from polybus import use

    tag = use("tag")

    def main():
        if kept.value is None:
            return common.Point(1, 2)
        return tag(kept.value)[1]          # pickled: its class must be common's own
"""


@pytest.mark.timeout(120)
def test_a_value_of_an_unchanged_helpers_class_goes_to_a_later_runs_call(
        tmp_path: Path, no_worker_left: None) -> None:
    app = write_bound_app(tmp_path, server=SERVER, client=KEEP_CLIENT, names=("tag",),
                          server_keys="pickle = true", client_keys="pickle = true")
    (tmp_path / "common.py").write_text(
        "NAME = 'c'\n\n\nclass Point:\n    def __init__(self, x, y):\n"
        "        self.x, self.y = x, y\n")
    kept = types.SimpleNamespace(value=None)
    sys.modules["embedded_imports_kept"] = kept  # type: ignore[assignment]
    try:
        kept.value = polybus.run(app, worker_output=False).result
        back = polybus.run(app, worker_output=False).result
    finally:
        sys.modules.pop("embedded_imports_kept", None)
    assert (type(back).__name__, back.x, back.y) == ("Point", 1, 2)


NS_SERVER = """
    from helpers import common

    def tag(x):
        return common.NAME, x
"""

NS_CLIENT = """
    from helpers import common             # (helpers/: a folder without __init__.py)
    from polybus import use

    tag = use("tag")

    def main():
        return common.NAME, tag(0)[0]
"""


@pytest.mark.timeout(120)
def test_a_helper_edited_in_a_folder_without_init_is_the_new_one_at_the_client(
        tmp_path: Path, no_worker_left: None) -> None:
    """A namespace package (a folder with no ``__init__.py``) is kept by Python, and
    ``from helpers import common`` took the old module from its attribute, though
    ``helpers.common`` had been taken out of ``sys.modules``."""
    app = write_bound_app(tmp_path, server=NS_SERVER, client=NS_CLIENT, names=("tag",))
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "common.py").write_text("NAME = 'before'\n")
    assert polybus.run(app, worker_output=False).result == ("before", "before")
    (tmp_path / "helpers" / "common.py").write_text("NAME = 'after the edit'\n")
    assert polybus.run(app, worker_output=False).result == ("after the edit",
                                                            "after the edit")


ALONE_CLIENT = """
    from polybus import use

    tag = use("tag")

    def main():
        return tag(0)[0]
"""


@pytest.mark.parametrize("sub", ["", "served"])  # (its file beside the client's, or not)
def test_a_helper_of_a_module_called_in_the_client_edited_between_runs_is_the_new_one(
        tmp_path: Path, sub: str) -> None:
    """``replication = 0``: the served module is imported into the client process, as
    are the helpers it imports. Its helpers were imported before the run noted what was
    there already, so an edited one stayed the old module (a replica, a new process,
    has the new one); so did one beside a served file in a folder of its own."""
    app = write_bound_app(tmp_path, server="", client=ALONE_CLIENT, names=("tag",),
                          server_keys="replication = 0")
    home = tmp_path / sub
    home.mkdir(exist_ok=True)
    (home / "server.py").write_text(textwrap.dedent(SERVER))
    if sub:
        app.write_text(app.read_text().replace('"server.py"', f'"{sub}/server.py"'))
    (home / "common.py").write_text("NAME = 'before'\n")
    assert polybus.run(app).result == "before"
    (home / "common.py").write_text("NAME = 'after the edit'\n")
    assert polybus.run(app).result == "after the edit"


@pytest.mark.timeout(120)
def test_an_earlier_program_s_folder_lends_a_later_one_no_file(
        tmp_path: Path, no_worker_left: None) -> None:
    """A program's folder stayed on sys.path after its run, and its ``helpers.py`` was
    imported by the next program of the process for that one's ``helpers/`` folder
    without ``__init__.py`` (a module file wins over such a folder wherever it is)."""
    first = write_bound_app(tmp_path / "first", server="def tag(x):\n    return x\n",
                            client="from polybus import use\ntag = use('tag')\n\n"
                                   "def main():\n    return tag(1)\n", names=("tag",))
    (tmp_path / "first" / "helpers.py").write_text("NAME = 'the first program'\n")
    assert polybus.run(first, worker_output=False).result == 1
    later = write_bound_app(tmp_path / "later", server=NS_SERVER, client=NS_CLIENT,
                            names=("tag",))
    (tmp_path / "later" / "helpers").mkdir()
    (tmp_path / "later" / "helpers" / "common.py").write_text("NAME = 'its own'\n")
    assert polybus.run(later, worker_output=False).result == ("its own", "its own")
