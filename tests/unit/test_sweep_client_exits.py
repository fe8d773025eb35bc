"""A client program that calls sys.exit in one combination: that cell fails, saying the
status, and the sweep goes on (it ended the whole sweep with the program's status, no
table and no --json); a SystemExit that is not the program's (an mpi rank that served
its replica and exits) still ends the process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli.cmd_sweep import _runner
from polybus.sweep import run_sweep

ARGS = "modules.client.args"


def _app(tmp_path: Path) -> str:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text(
        "import sys\nfrom polybus import use\nf = use('f')\n\n\n"
        "def main(mode):\n    if mode == 'exit':\n        sys.exit(4)\n    return f(1)\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "server.py"\nreplication = 0\n\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\nargs = ["ok"]\n\n'
        '[bind]\n"client.f" = "server.f"\n')
    return str(tmp_path / "app.toml")


def test_a_client_that_exits_fails_its_cell_and_the_sweep_goes_on(tmp_path: Path) -> None:
    sweep = run_sweep(_app(tmp_path), [(ARGS, ['["ok"]', '["exit"]', '["ok2"]'])], 2, _runner)
    assert sweep.interrupted is None
    assert [c.ok for c in sweep.cells] == [True, False, True]
    assert [len(c.elapsed_s) for c in sweep.cells] == [2, 0, 2]
    error = sweep.cells[1].error or ""
    assert error.startswith("SystemExit: 4 (the program exited, status 4)\nTraceback")
    assert "client.py\", line 8, in main" in error


def test_a_system_exit_that_is_not_the_program_s_ends_the_sweep() -> None:
    def runner(path: str, sets: Sequence[str]) -> float:
        raise SystemExit(0)

    with pytest.raises(SystemExit):
        run_sweep("a.toml", [(ARGS, ["[1]", "[2]"])], 1, runner)
