"""A command imports its own module alone: a run starts each of its workers as
`polybus worker`, which imported every command's module (bench's, sweep's, their
tables and plots) before serving; `polybus --help` still lists every command."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from polybus.cli.main import COMMANDS, main

LOADED = ("import sys\n"
          "from polybus.cli.main import parse\n"
          "args = parse({argv})\n"
          "print(args.command, sorted(m for m in sys.modules if m.startswith('polybus.cli.cmd_')))\n")


@pytest.mark.parametrize("argv", [
    ["worker", "--registry", "127.0.0.1:1", "--module", "server.py"],
    ["registry", "--listen", "127.0.0.1:0"],
    ["run", "app.toml", "--quiet"],
])
@pytest.mark.parametrize("given", ["argument", "sys.argv"])
def test_a_command_imports_its_own_module_alone(argv: list[str], given: str) -> None:
    code = (LOADED.format(argv=repr(argv)) if given == "argument" else
            f"import sys\nsys.argv[1:] = {argv!r}\n" + LOADED.format(argv="None"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [argv[0], f"['polybus.cli.cmd_{argv[0]}']"], p.stdout


def test_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    for name, help_text in COMMANDS.items():  # (its row: the name, then its help's start)
        start = r"\s+".join(map(re.escape, help_text.split()[:3]))
        assert re.search(rf"^\s+{name}\s+{start}", out, re.MULTILINE), (name, out)


def test_a_commands_help_and_an_unknown_command_are_as_before(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["worker", "--help"])
    assert "--registry" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ended:
        main(["serv", "app.toml"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'serv'" in err and "'serve'" in err, err
