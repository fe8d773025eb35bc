"""A misspelt table name is one mistake: the errors that only follow from it (every use
left unbound by ``[binds]``) are folded into its own line, not listed after it; errors
that do not follow from it still are."""

from __future__ import annotations

from pathlib import Path

from polybus.config import validate

SERVER = "def f(x):\n    return x\n\n\ndef g(x):\n    return x\n\n\ndef h(x):\n    return x\n"
CLIENT = ("from polybus import use\n\nf = use('f')\ng = use('g')\nh = use('h')\n\n\n"
          "def main():\n    return f(1), g(2), h(3)\n")
TOML = '''\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.f = { callstyle = "async" }
use.g = { callstyle = "async" }
use.h = { callstyle = "async" }

[bind]
"client.f" = "server.f"
"client.g" = "server.g"
"client.h" = "server.h"
'''
FOLD = "more errors follow from it; fix it first"
ONE = "1 more error follows from it; fix it first"


def _found(tmp_path: Path, old: str, new: str, *more: tuple[str, str]
           ) -> list[tuple[str | None, str, str | None]]:
    """(key, message, hint) of every mistake in the program with ``old`` written ``new``
    (and each of ``more`` pairs so too)."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    text = TOML
    for a, b in ((old, new), *more):
        assert a in text
        text = text.replace(a, b)
    path = tmp_path / "app.toml"
    path.write_text(text)
    _, errors = validate(str(path))
    return [(e.key, e.bare_message, e.hint) for e in errors]


def test_a_misspelt_bind_table_is_one_error_that_counts_what_follows(tmp_path: Path) -> None:
    # (each of the client's three uses was also listed as an unbound interface)
    assert _found(tmp_path, "[bind]", "[binds]") == [
        ("binds", "unknown key 'binds'", f"did you mean 'bind'? 3 {FOLD}")]


def test_a_misspelt_modules_table_folds_what_follows(tmp_path: Path) -> None:
    # (missing table [modules], and no module 'client' nor 'server' for each binding)
    assert _found(tmp_path, "[modules.server]", "[module.server]",
                  ("[modules.client]", "[module.client]")) == [
        ("module", "unknown key 'module'", f"did you mean 'modules'? 7 {FOLD}")]


def test_a_misspelt_module_name_is_one_error_that_counts_what_follows(tmp_path: Path) -> None:
    # (each binding was "no module 'client'", and each use of clint "unbound interface")
    assert _found(tmp_path, "[modules.client]", "[modules.clint]") == [
        ('bind."client.f"', "no module 'client' (the user side of the binding)",
         f"did you mean 'clint'? 5 {FOLD}")]


def test_a_misspelt_server_name_is_one_error_too(tmp_path: Path) -> None:
    found = _found(tmp_path, "[modules.server]", "[modules.sever]")
    assert found == [('bind."client.f"', "binding target module 'server' does not exist",
                      f"did you mean 'sever'? 2 {FOLD}")]


def test_one_that_follows_is_counted_as_one_and_the_rest_listed(tmp_path: Path) -> None:
    # (use('g') and use('h') in client.py are unbound with [bind] spelt right too)
    found = _found(tmp_path, "[bind]", "[binds]",
                   ('"client.g" = "server.g"\n"client.h" = "server.h"\n', ""),
                   ('use.g = { callstyle = "async" }\nuse.h = { callstyle = "async" }\n', ""))
    assert [(key, hint) for key, _, hint in found] == [
        ("binds", f"did you mean 'bind'? {ONE}"),
        ('bind."client.g"', 'add to [bind]: "client.g" = "server.g"'),
        ('bind."client.h"', 'add to [bind]: "client.h" = "server.h"')], found


def test_errors_that_do_not_follow_from_the_misspelling_are_still_listed(
        tmp_path: Path) -> None:
    found = _found(tmp_path, "[bind]", "[binds]",
                   ('use.g = { callstyle = "async" }', 'use.g = { callstyle = "asink" }'),
                   ("replication = 2", "replicaton = 2"))
    assert [(key, FOLD in (hint or "")) for key, _, hint in found] == [
        ("binds", True), ("modules.server.replicaton", False),
        ("modules.client.use.g.callstyle", False)], found
    assert found[0][2] == f"did you mean 'bind'? 3 {FOLD}"


def test_errors_in_the_misspelt_module_itself_are_still_listed(tmp_path: Path) -> None:
    # (checked again under the name the bindings give it, their keys are its own)
    found = _found(tmp_path, "[modules.client]", "[modules.clint]",
                   ('use.g = { callstyle = "async" }', 'use.g = { callstyle = "asink" }'))
    assert [(key, FOLD in (hint or "")) for key, _, hint in found] == [
        ("modules.clint.use.g.callstyle", False), ('bind."client.f"', True)], found
    assert found[1][2] == f"did you mean 'clint'? 5 {FOLD}"


def test_a_misspelling_nothing_follows_from_says_nothing_more(tmp_path: Path) -> None:
    found = _found(tmp_path, "[bind]", '[cluster]\nengine = "local"\n\n[bind]',
                   ("[cluster]", "[clustr]"))
    assert found == [("clustr", "unknown key 'clustr'", "did you mean 'cluster'?")]
