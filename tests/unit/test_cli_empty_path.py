"""A configuration path given empty (``polybus check ''``, as a script's unset variable
gives it) is said to be empty. It was "Is a directory: '.'" (``Path('')`` is the
working directory), and ``worker --config ''`` and ``registry --config ''`` took it for
no --config at all: the registry started without the configuration's [cluster]."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from polybus.cli.main import main

EMPTY = "the configuration file's path is empty ('')"


@pytest.mark.parametrize("argv", [
    ["check", ""],
    ["check", "--no-import", ""],
    ["run", ""],
    ["sweep", "", "--vary", "modules.server.replication=1,2"],
    ["serve", ""],
    ["worker", "--config", "", "--as", "server", "--registry", "127.0.0.1:1"],
])
def test_an_empty_configuration_path_is_said_to_be_empty(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert EMPTY in err, err
    assert "Is a directory" not in err and "give --module" not in err
    if argv[0] == "check":
        assert err.endswith("1 problem(s) found checking ''\n")


def test_registry_config_empty_is_refused_not_taken_for_none() -> None:
    # (a subprocess: taken for no --config, the registry started and served on)
    p = subprocess.run([sys.executable, "-m", "polybus", "registry", "--config", "",
                        "--listen", "127.0.0.1:0"],
                       env={**os.environ, "POLYBUS_TOKEN": "t" * 32},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert f"polybus registry: error: {EMPTY}" in p.stderr
    assert "listening" not in p.stdout + p.stderr
