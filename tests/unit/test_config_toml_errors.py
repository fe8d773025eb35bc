"""A configuration that is not valid TOML, or not UTF-8, is said at its line with what
to do: tomllib's own words named no key ("Cannot overwrite a value (at line 16, column
16)", "Cannot mutate immutable namespace ('modules', 'server', 'define', 'f')"), and a
file saved in Latin-1 was said at a byte offset ("can't decode byte 0xe9 in position
31")."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from polybus.config import validate

BASE = '''\
[modules.server]
source = "server.py"
replication = 2
define.f = { pool = 2 }

[modules.client]
source = "client.py"
entrypoint = "main"
'''


def _found(tmp_path: Path, text: str | bytes) -> list[tuple[int | None, str, str | None]]:
    path = tmp_path / "app.toml"
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    _, errors = validate(str(path))
    assert all(e.file == str(path) for e in errors), errors
    return [(e.line, e.bare_message, e.hint) for e in errors]


@pytest.mark.parametrize(("old", "new", "line", "message", "hint"), [
    ("replication = 2\n", "replication = 2\nreplication = 3\n", 4,
     "not valid TOML: modules.server.replication is given twice (first at line 3)",
     "a key is given once in its table: keep one of them"),
    ("[modules.client]\n", '[modules.server]\npickle = true\n\n[modules.client]\n', 6,
     "not valid TOML: the table [modules.server] is declared twice (first at line 1)",
     "a table's keys go under one header: move them to the first"),
    ("define.f = { pool = 2 }\n", "define.f = { pool = 2 }\ndefine.f.queue = 8\n", 5,
     "not valid TOML: modules.server.define.f was written whole as an inline table at "
     "line 4, and line 5 adds to it",
     "an inline table { ... } takes no keys after it: put this one inside its braces, "
     "or write it as a table of its own, [modules.server.define.f]"),
    # others keep tomllib's words, at their line and column
    ("[modules.client]\n", "[modules.client\n", 6,
     "not valid TOML: Expected ']' at the end of a table declaration (at column 16)", None),
])
def test_toml_that_does_not_parse_is_said_at_its_line_with_the_key(
        tmp_path: Path, old: str, new: str, line: int, message: str,
        hint: str | None) -> None:
    assert _found(tmp_path, BASE.replace(old, new, 1)) == [(line, message, hint)]


@pytest.mark.parametrize("mark", [b"", codecs.BOM_UTF8])
def test_a_file_that_is_not_utf8_is_said_at_its_line(tmp_path: Path, mark: bytes) -> None:
    text = BASE.replace("[modules.client]", "# café\n[modules.client]").encode("latin-1")
    assert _found(tmp_path, mark + text) == [
        (6, "the configuration file is not UTF-8 text: byte 0xe9 at column 6",
         "save it as UTF-8; a byte order mark at its start is read past")]


def test_a_python_module_given_as_the_configuration_is_said_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`polybus run client.py`, as `python client.py` runs it: it was said as tomllib's
    "not valid TOML: Expected '=' after a key in a key/value pair (at column 6)"."""
    from polybus.cli.main import main

    (tmp_path / "client.py").write_text("from polybus import use\n\nf = use('f')\n")
    assert main(["run", str(tmp_path / "client.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polybus run: error: {tmp_path / 'client.py'}: a Python module, "
                          "not a configuration"), err
    assert "not valid TOML" not in err and "such as app.toml" in err
