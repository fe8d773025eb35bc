"""File names that name no file to read: a NUL character in one (TOML's "\\u0000", a
--set, or a caller of ``main`` from Python), a source that is a directory or a device.

A new-user trial: ``source = "server\\u0000.py"`` (or ``--set
'modules.server.source="a\\u0000b"'``) ended ``check`` and ``run`` in a traceback,
``ValueError: embedded null byte`` from schema.py's source_file, and ``source = "/etc"``
was said "not found (looked for '/etc')".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import main
from polybus.config import module_sources, validate
from polybus.errors import UsageError
from polybus.testing.apps import write_one_call_app
from polybus.token import read_token

NUL = "contains a NUL character, which no file name can hold"


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_one_call_app(tmp_path)


def said(app: Path, *sets: str) -> list[tuple[str | None, str | None, str]]:
    config, errors = validate(app, sets)
    assert config is None
    return [("file" if e.file == str(app) else e.file, e.key, e.bare_message)
            for e in errors]


def test_a_nul_in_the_file_s_source_is_an_error_at_its_key(app: Path) -> None:
    app.write_text(app.read_text().replace('"server.py"', '"server\\u0000.py"'))
    assert said(app) == [("file", "modules.server.source", f"source 'server\\x00.py' {NUL}")]
    assert module_sources(app) == {str(app.parent / "client.py"): "client"}


def test_a_nul_in_an_override_s_source_is_the_override_s(app: Path) -> None:
    sets = ('modules.server.source="a\\u0000b"',)
    assert said(app, *sets) == [("--set", "modules.server.source", f"source 'a\\x00b' {NUL}")]
    assert str(app.parent / "server.py") in module_sources(app, sets)  # (the file's)


def test_a_nul_in_the_cluster_s_files(app: Path) -> None:
    sets = ('cluster.token_file="t\\u0000"', 'cluster.tls={cert="c\\u0000", key="/etc", '
            'ca="/dev/null"}')
    assert said(app, *sets) == [
        ("--set", "cluster.token_file", f"token_file 't\\x00' {NUL}"),
        ("--set", "cluster.tls.cert", f"cert file 'c\\x00' {NUL}"),
        ("--set", "cluster.tls.key", "key file '/etc' is a directory"),
        ("--set", "cluster.tls.ca", "ca file '/dev/null' is not a regular file")]


def test_a_nul_in_the_configuration_s_name(tmp_path: Path) -> None:
    config, errors = validate(str(tmp_path / "a\0b.toml"))
    assert config is None
    assert [(e.file, e.bare_message) for e in errors] == [
        (f"{tmp_path}/a\\x00b.toml", f"the configuration file's name {NUL}")]


def test_a_nul_in_a_token_file_s_name() -> None:
    with pytest.raises(UsageError, match=f"token file 'a\\\\x00b' {NUL}"):
        read_token("a\0b")


@pytest.mark.parametrize(("source", "message"), [
    ("/etc", "source '/etc' is a directory"),
    ("/dev/null", "source '/dev/null' is not a regular file"),
    ("sub", "source 'sub' ({sub!r}) is a directory"),
    ("loop", "source 'loop' ({loop!r}) cannot be read: Too many levels of symbolic links"),
    ("~nosuchuser/s.py", "source file '~nosuchuser/s.py' not found (looked for {home!r})"),
])
def test_a_source_that_is_not_a_regular_file_is_said_so(app: Path, source: str,
                                                        message: str) -> None:
    (app.parent / "sub").mkdir()
    (app.parent / "loop").symlink_to("loop")  # (RuntimeError: Symlink loop, as ~nosuchuser)
    where = {k: str(app.parent / k) for k in ("sub", "loop")}
    assert said(app, f'modules.server.source="{source}"') == [
        ("--set", "modules.server.source",
         message.format(home=str(app.parent / source), **where))]


@pytest.mark.parametrize(("argv", "line"), [
    (["run", "app.toml", "--json", "a\0b"], f"polybus run: error: --json 'a\\x00b': {NUL}"),
    (["sweep", "app.toml", "--vary", "modules.server.replication=1,2", "--csv", "a\0b"],
     f"polybus sweep: error: --csv 'a\\x00b': {NUL}"),
    (["worker", "--module", "a\0b", "--registry", "127.0.0.1:1"],
     f"polybus worker: error: --module 'a\\x00b': {NUL}"),
    (["worker", "--module", "/etc", "--registry", "127.0.0.1:1"],
     "polybus worker: error: --module: /etc is a directory; give the module's Python file"),
])
def test_command_line_file_names(app: Path, argv: list[str], line: str,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(app.parent)
    assert main(argv) == 2
    assert capsys.readouterr().err == line + "\n"
