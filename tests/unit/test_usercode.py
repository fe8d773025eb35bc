"""A module that fails to import becomes a ModuleImportError in the user's terms."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.errors import ModuleImportError
from polybus.worker.module import load_module


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    before = list(sys.path)
    yield tmp_path
    sys.path[:] = before  # load_module puts the module's folder on sys.path
    for name in ("polybus_user_srv", "helper_for_usercode"):
        sys.modules.pop(name, None)


def failure(path: Path) -> ModuleImportError:
    with pytest.raises(ModuleImportError) as e:
        load_module(path, "polybus_user_srv")
    assert "polybus_user_srv" not in sys.modules
    return e.value


def test_a_syntax_error_names_module_file_and_line(folder: Path) -> None:
    src = folder / "srv.py"
    src.write_text("def f(x):\n    return x\n\ndef g(:\n    pass\n")
    e = failure(src)
    assert (e.module, e.file, e.line) == ("srv", str(src), 4)
    assert "module 'srv'" in str(e) and "SyntaxError" in str(e) and "at line 4" in str(e)
    assert "def g(:" in str(e)  # the offending line, with its caret
    assert "importlib" not in str(e) and "<frozen" not in str(e)


def test_a_failure_in_a_helper_shows_both_files_and_the_modules_line(folder: Path) -> None:
    (folder / "helper_for_usercode.py").write_text("x = {}\ny = x['missing']\n")
    src = folder / "srv.py"
    src.write_text("import os\nimport helper_for_usercode\n")
    e = failure(src)
    assert e.line == 2 and "KeyError: 'missing' at line 2" in str(e)
    assert 'helper_for_usercode.py", line 2' in str(e) and 'srv.py", line 2' in str(e)
    assert "polybus/" not in str(e)


def test_exiting_at_import_is_reported_not_obeyed(folder: Path) -> None:
    src = folder / "srv.py"
    src.write_text("import sys\nsys.exit(3)\n")
    e = failure(src)
    assert e.line == 2 and "the module exits when it is imported" in str(e)


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "Weird('odd')"],
                         ids=["KeyboardInterrupt", "BaseException-subclass"])
def test_a_base_exception_at_import_is_reported_with_its_line(folder: Path,
                                                              raised: str) -> None:
    """As any exception: its file and line. (A BaseException subclass came out as
    polybus's own traceback, a KeyboardInterrupt as the worker being interrupted.)"""
    src = folder / "srv.py"
    src.write_text(f"class Weird(BaseException):\n    pass\n\nraise {raised}\n")
    e = failure(src)
    assert (e.module, e.line) == ("srv", 4)
    what = "KeyboardInterrupt" if raised == "KeyboardInterrupt" else "srv.Weird: odd"
    assert f"failed to import: {what} at line 4" in str(e)
    assert f"raise {raised}" in str(e)


def test_a_ctrl_c_while_a_module_imports_is_a_ctrl_c(folder: Path) -> None:
    """Not the module's failure: the command stops as for Ctrl-C. (In a child process of
    its own: a test runner's worker may not have Python's own SIGINT handler.)"""
    src = folder / "srv.py"
    src.write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                   "time.sleep(5)\n")
    child = (
        "import signal, sys\n"
        "from polybus.worker.module import load_module\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "try:\n"
        f"    load_module({str(src)!r}, 'polybus_user_srv')\n"
        "except KeyboardInterrupt:\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "    assert 'polybus_user_srv' not in sys.modules\n"
        "    print('interrupted')\n"
        "else:\n"
        "    print('imported')\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=60, start_new_session=True)
    assert out.returncode == 0 and out.stdout.strip() == "interrupted", (out.stdout,
                                                                        out.stderr)


def test_a_class_of_the_module_is_named_as_the_user_knows_it(folder: Path) -> None:
    """``srv.E``, as a call's error names it, not its internal ``polybus_user_srv.E``."""
    src = folder / "srv.py"
    src.write_text("class E(Exception):\n    pass\n\nraise E('no')\n")
    e = failure(src)
    assert "failed to import: srv.E: no at line 4" in str(e)
    assert "polybus_user_" not in str(e)
