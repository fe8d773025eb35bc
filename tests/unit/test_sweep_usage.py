"""`polybus sweep` mistakes on its command line: one clear line each, nothing run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.testing.apps import write_app, write_one_call_app


def _sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, int]:
    """(exit status, runs) of ``polybus sweep APP argv...`` with a runner that runs
    nothing."""
    runs: list[Sequence[str]] = []
    monkeypatch.setattr(cmd_sweep, "_runner", lambda p, s: runs.append(s) or 1.0)
    app = write_one_call_app(tmp_path)
    return main(["sweep", str(app), *argv]), len(runs)


def test_repeat_0_is_one_error_line_with_no_blank_line_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The check was made under the progress bar, whose end printed an empty line first.
    assert _sweep(tmp_path, monkeypatch, "--vary", "modules.server.replication=1,2",
                  "--repeat", "0") == (2, 0)
    assert capsys.readouterr().err == (
        "polybus sweep: error: --repeat must be at least 1, got 0\n")


@pytest.mark.parametrize(("baseline", "hint"), [
    ("replicaton=1", "; did you mean 'replication'?"),
    ("server.replicaton=1", "; did you mean 'server.replication'?"),
    ("modules.server.replicaton=1", "; did you mean 'modules.server.replication'?"),
    ("callstyle=sync", ""),  # (nothing close: no guess)
])
def test_a_misspelt_baseline_key_gets_the_nearest_vary_key(
        baseline: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Every other key mistake had a "did you mean"; --baseline had none.
    assert _sweep(tmp_path, monkeypatch, "--vary", "modules.server.replication=1,2",
                  "--baseline", baseline) == (2, 0)
    key = baseline.partition("=")[0]
    assert capsys.readouterr().err == (
        f"polybus sweep: error: --baseline key {key!r} matches no --vary key "
        f"(varied: modules.server.replication){hint}\n")


def test_a_varied_kwarg_that_the_file_s_args_give_too_is_blamed_on_vary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # It was said against the file ("app.toml: modules.client.args: ..."), which the
    # user had not changed, with no word of the --vary that gave `tasks` a second time.
    client = "from polybus import use\n\nf = use('f')\n\n\ndef main(tasks, n=1):\n    return f(1)\n"
    app = write_app(tmp_path, server="def f(x):\n    return x\n", client=client, toml="""\
        [modules.server]
        source = "server.py"

        [modules.client]
        source = "client.py"
        entrypoint = "main"
        args = [20, 3]

        [bind]
        "client.f" = "server.f"
        """)
    runs: list[Sequence[str]] = []
    monkeypatch.setattr(cmd_sweep, "_runner", lambda p, s: runs.append(s) or 1.0)
    assert main(["sweep", str(app), "--vary", "modules.client.kwargs.tasks=5,10"]) == 2
    assert runs == []
    assert capsys.readouterr().err == (
        "polybus sweep: error: --vary: modules.client.kwargs.tasks: the entrypoint "
        "main(tasks, n=1) cannot take these arguments: multiple values for argument "
        f"'tasks' (modules.client.args in {app} gives it by position already)\n")
