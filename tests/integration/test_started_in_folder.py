"""The folder a command is started in is not the program's: a file there named like a
module Python or polybus imports (``typing.py``) shadows nothing in the processes polybus
starts (its workers, check's import check), as it shadows nothing in `polybus run`
itself, started by its script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from integration.conftest import ROOT, descendants, env_with, kill_all
from polybus.testing.apps import write_bound_app

SHADOW = 'raise RuntimeError("the folder the command was started in was imported from")\n'


def _polybus(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    # As the installed `polybus` script starts: its own folder on sys.path, not the
    # working directory (``-P``).
    # (and no empty entry in PYTHONPATH, which names the working directory too)
    env = dict(env_with(), PYTHONPATH=str(ROOT / "src"))
    p = subprocess.Popen([sys.executable, "-P", "-m", "polybus", *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, env=env, cwd=cwd)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_all(descendants(p.pid))
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"polybus {args} did not finish:\n{err}") from None
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def test_a_module_file_in_the_working_directory_shadows_nothing(tmp_path: Path) -> None:
    app = write_bound_app(tmp_path / "program", names=("f",),
                          server="def f(x):\n    return x * 2\n",
                          client="from polybus import use\nf = use('f')\n\n"
                                 "def main():\n    return f(21)\n",
                          # (and a process pool, whose children are started by the worker)
                          server_keys='replication = 1\ndefine.f = { pool = "processes:1" }')
    here = tmp_path / "here"
    here.mkdir()
    (here / "typing.py").write_text(SHADOW)
    checked = _polybus("check", app, cwd=here)
    assert checked.returncode == 0, checked.stderr
    ran = _polybus("run", app, "--quiet", cwd=here)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "42"
