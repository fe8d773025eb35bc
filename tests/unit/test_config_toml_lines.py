"""A TOML configuration's errors say the line that wrote their key (config/tomllines.py):
they named the file and the key only, where a MIL file's said the line."""

from __future__ import annotations

from pathlib import Path

from polybus.config import validate
from polybus.config.tomllines import TomlLines

TEXT = '''# a comment = not a key
[modules.server]
source = "server.py"
notes = """
replication = 9
"""
replication = 2
define.f = { cache = ["b"],
             pool = 2 }

[modules.client]
'entrypoint' = "main"
use."odd name" = { callstyle = "async" }

[bind]
"client.f" = "server.f"
'''


def test_keys_tables_and_what_is_inside_them_are_placed() -> None:
    at = TomlLines(TEXT)
    assert at.locate("modules.server") == 2
    assert at.locate("modules.server.replication") == 7  # (not the line in the string)
    assert at.locate("modules.server.define.f.cache") == 8  # (inside an inline table)
    assert at.locate("modules.server.define.f.pool") == 8
    assert at.locate("modules.client.entrypoint") == 12
    assert at.locate('modules.client.use."odd name".callstyle') == 13
    assert at.locate('bind."client.f"') == 16
    assert at.locate("modules.client.args") == 11  # missing: its table's header
    assert at.locate("modules.client.args[2]") == 11
    assert at.locate("cluster.engine") is None and at.locate(None) is None


def test_an_error_in_a_toml_file_says_its_line(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\n\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        'use.f = { callstyle = "async", timout = 3 }\n\n[bind]\n"c.f" = "s.f"\n')
    _, errors = validate(tmp_path / "app.toml")
    assert [(e.key, e.line) for e in errors] == [("modules.c.use.f.timout", 7)]
    assert str(errors[0]).startswith(f"{tmp_path / 'app.toml'}:7: modules.c.use.f.timout: ")


def test_an_override_s_error_says_no_line_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        '[bind]\n"c.f" = "s.f"\n')
    _, errors = validate(tmp_path / "app.toml", ["modules.s.replicaton=2"])
    assert [(e.file, e.line) for e in errors] == [("--set", None)]


def test_a_misspelt_table_of_a_dotted_header_says_its_line(tmp_path: Path) -> None:
    # (a new user's [module.worker] for [modules.worker] said "app.toml: module: unknown
    # key 'module'", no line, where [binds] for [bind] said its line)
    at = TomlLines('# x\n[module.worker]\nsource = "w.py"\n\n[module.client]\n')
    assert at.locate("module") == 2 and at.locate("module.client") == 5
    (tmp_path / "w.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "app.toml").write_text('\n[module.worker]\nsource = "w.py"\n')
    _, errors = validate(tmp_path / "app.toml")
    assert ("module", 2) in [(e.key, e.line) for e in errors], errors
