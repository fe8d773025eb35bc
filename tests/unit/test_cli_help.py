"""What `polybus --help` says a command does is what it does."""

from __future__ import annotations

import pytest

from polybus.cli.main import COMMANDS, main


def test_check_help_says_it_imports_the_modules(capsys: pytest.CaptureFixture[str]) -> None:
    # check runs each module's top-level code (in a child process): "without starting
    # anything" let a user think their code would not run.
    assert "import each module in a child process" in COMMANDS["check"]
    assert "--no-import" in COMMANDS["check"]
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "child process" in " ".join(capsys.readouterr().out.split())
