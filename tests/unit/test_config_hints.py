"""Mistakes whose fix is not a spelling: a value's quoting, a key's place, a --set's blame."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = "def compare(query: str, entry: str) -> int:\n    return 0\n"
CLIENT = '''\
from polybus import use

compare = use("compare")


def main(queries, entry):
    return [compare(q, entry) for q in queries]
'''
BASE = '''\
[modules.server]
source = "server.py"
replication = 2
define.compare = { priority = "len(query)" }

[modules.client]
source = "client.py"
entrypoint = "main"
use.compare = { callstyle = "async" }

[bind]
"client.compare" = "server.compare"
'''

Found = list[tuple[str | None, str | None, str, str | None]]


def errors(tmp_path: Path, toml: str = BASE, overrides: tuple[str, ...] = ()) -> Found:
    """(file as the user sees it, key, message, hint) of every mistake."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    _, found = validate(str(path), overrides)
    return [("file" if e.file == str(path) else e.file, e.key, e.bare_message, e.hint)
            for e in found]


PRIORITY = "modules.server.define.compare.priority"
WHY = "the priority is a Python expression over the call's parameters; "


def test_a_bare_number_priority_in_the_file_shows_the_quotes(tmp_path: Path) -> None:
    toml = BASE.replace('priority = "len(query)"', "priority = 0")
    assert errors(tmp_path, toml) == [
        ("file", PRIORITY, "expected an expression string, got an integer 0",
         WHY + 'write it quoted: priority = "0"')]


def test_a_bare_number_priority_from_set_shows_the_shell_quoting(tmp_path: Path) -> None:
    assert errors(tmp_path, overrides=(f"{PRIORITY}=0",)) == [
        ("--set", PRIORITY, "expected an expression string, got an integer 0",
         WHY + f"""quote it for TOML inside the shell's quotes: --set '{PRIORITY}="0"'""")]


def test_the_quoted_priority_the_hint_shows_is_valid(tmp_path: Path) -> None:
    assert errors(tmp_path, overrides=(f'{PRIORITY}="0"',)) == []


@pytest.mark.parametrize("example", ["dna"])
def test_the_example_comment_command_is_valid(example: str) -> None:
    """The --set an example's comment suggests is one polybus accepts."""
    app = Path(__file__).resolve().parents[2] / "examples" / example / "app.toml"
    lines = [ln for ln in app.read_text().splitlines() if "--set '" in ln]
    assert lines
    for line in lines:
        sets = line.split("--set '", 1)[1].rsplit("'", 1)[0]
        assert validate(app, [sets])[1] == []
