"""The README's "Your own program" runs as the README shows: its three files, taken
from the README itself, and the results it prints."""

from __future__ import annotations

import re
from pathlib import Path

import polybus
from integration.conftest import ROOT, cli


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Your own program", 1)[1].split("\n## ", 1)[0]


def test_the_readme_s_first_program_runs_as_shown(tmp_path: Path) -> None:
    blocks = re.findall(r"```(python|toml)\n(.*?)```", _section(), re.S)
    files = dict(zip(("server.py", "client.py", "app.toml"), (b for _, b in blocks),
                     strict=True))
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    shown = re.findall(r"^\$ polybus (.*)\n(.*)$", _section(), re.M)
    assert len(shown) == 3, shown
    for command, output in shown:
        args = [a.replace("app.toml", str(tmp_path / "app.toml")) for a in command.split()]
        p = cli(*args, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        got = p.stdout.strip().splitlines()[-1]
        assert got == output.replace("app.toml", str(tmp_path / "app.toml")) or (
            command.startswith("check") and got.endswith(output.split(":", 1)[1])), (got, output)
    assert polybus.run(tmp_path / "app.toml", overrides={"modules.client.args": [5]}).result == 30
