"""A misspelling is reported once, with the spelling it was likely meant to be."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = "def f(x):\n    return x\n"
CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main():\n    return f(1)\n"
TOML = '''\
[modules.server]
source = "server.py"
define.f = {{ pool = {pool} }}

[modules.client]
source = "client.py"
{entry} = "main"

[bind]
"client.f" = "server.f"
'''
FORMS = "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"
POOL = "modules.server.define.f.pool"


def _found(tmp_path: Path, pool: str = "2", entry: str = "entrypoint"
           ) -> list[tuple[str | None, str, str | None]]:
    """(key, message, hint) of every mistake in the program written with ``pool`` (as
    TOML) and ``entry`` as the client's entrypoint key."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(TOML.format(pool=pool, entry=entry))
    _, errors = validate(str(path))
    return [(e.key, e.bare_message, e.hint) for e in errors]


@pytest.mark.parametrize(("pool", "meant"), [
    ('"proceses:2"', "processes:2"),
    ('"Threads:4"', "threads:4"),
    ('"thread : 3"', "threads:3"),
    ('"process"', "processes:N"),           # (no size: the form's N)
    ('"proceses:0"', "processes:N"),        # (a size out of range is not suggested)
])
def test_a_misspelt_pool_kind_gets_the_pool_it_was_meant_to_be(
        tmp_path: Path, pool: str, meant: str) -> None:
    assert _found(tmp_path, pool) == [
        (POOL, f"expected a pool size, got {pool.replace(chr(34), chr(39))}",
         f"did you mean {meant!r}? A pool size is {FORMS}")]


@pytest.mark.parametrize("pool", ['"gpus:2"', '"processes:0"', '"threads"', "0", '"2"'])
def test_a_pool_like_no_kind_gets_the_forms_alone(tmp_path: Path, pool: str) -> None:
    assert [hint for _, _, hint in _found(tmp_path, pool)] == [FORMS]


@pytest.mark.parametrize("entry", ["entrypiont", "Entrypoint", "entry_point"])
def test_a_misspelt_entrypoint_is_one_mistake_not_also_a_missing_entrypoint(
        tmp_path: Path, entry: str) -> None:
    assert _found(tmp_path, entry=entry) == [
        (f"modules.client.{entry}", f"unknown key {entry!r}", "did you mean 'entrypoint'?")]


@pytest.mark.parametrize(("value", "got"), [("7", "an integer 7"), ('["main"]', "an array ['main']")])
def test_an_entrypoint_of_the_wrong_type_is_one_mistake_not_also_a_missing_entrypoint(
        tmp_path: Path, value: str, got: str) -> None:
    # (it was followed by "modules: no module has an entrypoint", though one was given)
    _found(tmp_path)  # (the program, with entrypoint = "main")
    path = str(tmp_path / "app.toml")
    _, by_set = validate(path, [f"modules.client.entrypoint={value}"])
    Path(path).write_text(Path(path).read_text().replace('"main"', value))
    _, in_file = validate(path)
    for errors in (by_set, in_file):
        assert [(e.key, e.bare_message) for e in errors] == [
            ("modules.client.entrypoint", f"expected a string, got {got}")], errors


def test_a_program_with_no_entrypoint_key_at_all_still_says_so(tmp_path: Path) -> None:
    found = _found(tmp_path, entry="args")  # (args = "main": no entrypoint anywhere)
    assert ("modules", "no module has an entrypoint") in [(k, m) for k, m, _ in found]


def test_an_unknown_key_near_another_still_leaves_the_missing_entrypoint_said(
        tmp_path: Path) -> None:
    found = _found(tmp_path, entry="sourse")  # (meant for source: the entrypoint is missing)
    assert [(k, m) for k, m, _ in found] == [
        ("modules.client.sourse", "unknown key 'sourse'"),
        ("modules", "no module has an entrypoint")]
