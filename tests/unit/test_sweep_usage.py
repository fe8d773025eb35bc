"""`polybus sweep` mistakes on its command line: one clear line each, nothing run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli import cmd_sweep
from polybus.cli.main import main
from polybus.testing.apps import write_one_call_app


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
