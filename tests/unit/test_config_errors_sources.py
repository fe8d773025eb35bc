"""Configuration mistakes found against the modules' sources, each with its message,
its dotted key and its hint: a module's source file and name, the entrypoint, what a
define names, the parameters a priority or cache reads, the bindings and the use calls
they answer (unbound interfaces, load ratios), and the likely mistakes only noted.
The application and its helpers are test_config_errors.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config_errors import (  # tests/unit
    BASE,
    CLIENT,
    Found,
    errors,
    one,
    set_define,
    set_use,
)

from polybus.config import validate
from polybus.config.problems import dotted

# -- modules and their sources ------------------------------------------------------------

def test_missing_source_key(tmp_path: Path) -> None:
    toml = BASE.replace('source = "server.py"\n', "")
    assert one(tmp_path, toml) == (
        "modules.server", "missing key 'source'",
        "the module's Python file, relative to the configuration file")


def test_missing_source_file(tmp_path: Path) -> None:
    toml = BASE.replace('source = "server.py"', 'source = "srv/server.py"')
    found = one(tmp_path, toml)
    assert found[0] == "modules.server.source"
    assert found[1] == (f"source file 'srv/server.py' not found (looked for "
                        f"{str(tmp_path / 'srv' / 'server.py')!r})")


def test_source_is_relative_to_the_config_directory(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert errors(tmp_path, BASE) == []


def test_source_with_a_syntax_error(tmp_path: Path) -> None:
    key, message, _ = one(tmp_path, BASE, server="def compare(:\n")
    assert key == "modules.server.source"
    assert message == (f"source file {str(tmp_path / 'server.py')!r} has a syntax error at "
                       "line 1: invalid syntax")


@pytest.mark.parametrize("name", ["my.server", "sérver", "1server"])
def test_bad_module_name(tmp_path: Path, name: str) -> None:
    # (é is a letter: the hint said "letters" and 'sérver' was refused all the same)
    toml = BASE.replace("[modules.server]", f'[modules."{name}"]')
    assert (dotted("modules", name), f"bad module name {name!r}",
            "ASCII letters (a-z, A-Z), digits, '_' and '-', starting with a letter or '_'"
            ) in errors(tmp_path, toml)


def test_no_modules(tmp_path: Path) -> None:
    assert one(tmp_path, "[modules]\n") == (
        "modules", "no modules", "add [modules.<name>] tables, each with a source")


def test_no_entrypoint(tmp_path: Path) -> None:
    toml = BASE.replace('entrypoint = "main"\n', "")
    assert ("modules", "no module has an entrypoint",
            'exactly one module (the client) needs entrypoint = "main" or similar, '
            "or a [serve] table routes HTTP requests to the modules") in errors(tmp_path, toml)


def test_two_entrypoints(tmp_path: Path) -> None:
    toml = BASE.replace("replication = 4", 'replication = 4\nentrypoint = "compare"')
    assert one(tmp_path, toml) == (
        "modules.client.entrypoint",
        "several modules have an entrypoint (server, client); exactly one (the client) may",
        None)


def test_entrypoint_not_a_top_level_function(tmp_path: Path) -> None:
    assert one(tmp_path, BASE.replace('entrypoint = "main"', 'entrypoint = "mian"')) == (
        "modules.client.entrypoint",
        "entrypoint 'mian' is not a top-level function of client.py", "did you mean 'main'?")
    assert one(tmp_path, BASE.replace('entrypoint = "main"', 'entrypoint = "zzz"')) == (
        "modules.client.entrypoint",
        "entrypoint 'zzz' is not a top-level function of client.py",
        "top-level functions: main, _setup")


def test_entrypoint_that_is_a_variable_is_not_a_function(tmp_path: Path) -> None:
    assert one(tmp_path, BASE.replace('entrypoint = "main"', 'entrypoint = "compare"'))[1] == (
        "entrypoint 'compare' is not a top-level function of client.py")


def test_entrypoint_not_a_name(tmp_path: Path) -> None:
    assert one(tmp_path, BASE.replace('entrypoint = "main"', 'entrypoint = "main()"')) == (
        "modules.client.entrypoint", "entrypoint 'main()' is not a function name", None)


def test_define_not_a_top_level_function(tmp_path: Path) -> None:
    toml = BASE.replace("define.compare", "define.compre").replace(
        '"server.compare"', '"server.compre"')
    assert one(tmp_path, toml) == (
        "modules.server.define.compre",
        "interface 'compre' is not a top-level function of server.py",
        "did you mean 'compare'?")


def test_define_of_a_method_is_not_top_level(tmp_path: Path) -> None:
    toml = BASE + '\n[modules.other]\nsource = "other.py"\ndefine.compare = {}\n'
    found = one(tmp_path, toml, other="class A:\n    def compare(self):\n        pass\n")
    assert found == ("modules.other.define.compare",
                     "interface 'compare' is not a top-level function of other.py",
                     "there are no top-level functions")


# -- priorities and caches --------------------------------------------------------------

def test_priority_name_not_a_parameter(tmp_path: Path) -> None:
    assert one(tmp_path, BASE.replace("len(query)", "len(qeury) + size")) == (
        "modules.server.define.compare.priority",
        "priority 'len(qeury) + size': line 1, column 5: name 'qeury' is not a parameter of "
        "the interface", "did you mean 'query'?")


def test_priority_refused_construct(tmp_path: Path) -> None:
    assert one(tmp_path, BASE.replace("len(query)", "__import__('os')")) == (
        "modules.server.define.compare.priority",
        "priority \"__import__('os')\": line 1, column 1: a call to '__import__' is not "
        "allowed in a priority expression", "only len, min, max, abs may be called")


def test_priority_sees_every_kind_of_parameter(tmp_path: Path) -> None:
    toml = BASE + ('\n[modules.scorer]\nsource = "server.py"\n'
                   'define.score = { priority = "a + b + len(rest) + scale + len(options)" }\n')
    assert errors(tmp_path, toml) == []


def test_cache_parameter_not_a_parameter(tmp_path: Path) -> None:
    assert errors(tmp_path, set_define('cache = ["entry", "entri", "x"]')) == [
        ("modules.server.define.compare.cache",
         "cache parameter 'entri' is not a parameter of compare()", "did you mean 'entry'?"),
        ("modules.server.define.compare.cache",
         "cache parameter 'x' is not a parameter of compare()", "parameters: query, entry"),
    ]


# -- bindings -----------------------------------------------------------------------------

def rebind(line: str) -> str:
    return BASE.replace('"client.compare" = "server.compare"', line)


@pytest.mark.parametrize(("line", "key", "message", "hint"), [
    ('"client.compare" = "sever.compare"', 'bind."client.compare"',
     "binding target module 'sever' does not exist", "did you mean 'server'?"),
    ('"client.compare" = "zzz.compare"', 'bind."client.compare"',
     "binding target module 'zzz' does not exist", "modules: server, client"),
    ('"client.compare" = "server.compre"', 'bind."client.compare"',
     "module 'server' has no interface 'compre'", "did you mean 'compare'?"),
    ('"client.compare" = "server.score"', 'bind."client.compare"',  # (a function define omits)
     "module 'server' does not serve 'score': a module with a define table serves only "
     "the interfaces it lists (compare)", "add define.score = {} to [modules.server]"),
    ('"client.compare" = "server.zzz"', 'bind."client.compare"',
     "module 'server' has no interface 'zzz'", "interfaces of server: compare"),
    ('"client.compare" = "server"', 'bind."client.compare"', "bad binding target 'server'",
     'expected "servermodule.interface", e.g. "server.compare"'),
    ('"client.compare" = 5', 'bind."client.compare"',
     'expected a string "servermodule.interface", got an integer 5', None),
    ('"client.compare" = "client.main"', 'bind."client.compare"',
     "binding target module 'client' has no replicas", "give modules.client a replication"),
])
def test_bad_bindings(tmp_path: Path, line: str, key: str, message: str,
                      hint: str | None) -> None:
    # only the binding is reported: the client's use of "compare" is not "unbound" as well
    assert errors(tmp_path, rebind(line)) == [(key, message, hint)]


def test_a_binding_written_the_other_way_round_says_so(tmp_path: Path) -> None:
    """The server's side first, as `"server.compare" = "client.compare"`: it was said as
    "binding target module 'client' has no replicas" with the hint "give modules.client
    a replication", and 'compare' as unbound in the client besides."""
    assert errors(tmp_path, rebind('"server.compare" = "client.compare"')) == [(
        'bind."server.compare"',
        "the binding is written the other way round: 'client' is the program's client "
        "(its entrypoint runs it) and serves nothing; 'server' serves 'compare'",
        'write "client.compare" = "server.compare": the name the caller uses '
        '(module.name) = the module.interface that serves it')]


def test_binding_from_a_missing_user_module(tmp_path: Path) -> None:
    toml = rebind('"client.compare" = "server.compare"\n"clinet.compare" = "server.compare"')
    assert one(tmp_path, toml) == ('bind."clinet.compare"',
                                   "no module 'clinet' (the user side of the binding)",
                                   "did you mean 'client'?")


def test_binding_name_without_a_module(tmp_path: Path) -> None:
    toml = rebind('"client.compare" = "server.compare"\ncompare = "server.compare"')
    assert one(tmp_path, toml) == (
        "bind.compare", "bad binding name 'compare'",
        'expected "module.name" = "servermodule.interface", e.g. "client.compare" = '
        '"server.compare"')


def test_bound_twice(tmp_path: Path) -> None:
    toml = rebind('"client.compare" = "server.compare"\nclient.compare = "server.compare"')
    assert one(tmp_path, toml) == ('bind."client.compare"', "'client.compare' is bound twice",
                                   None)


def test_unquoted_bind_keys_are_nested_tables_and_work(tmp_path: Path) -> None:
    assert errors(tmp_path, rebind('client.compare = "server.compare"')) == []


def test_module_without_define_serves_its_public_functions(tmp_path: Path) -> None:
    toml = BASE.replace('define.compare = { priority = "len(query)" }\n', "")
    assert errors(tmp_path, toml) == []
    found = one(tmp_path, rebind('"client.compare" = "server._helper"').replace(
        'define.compare = { priority = "len(query)" }\n', ""))
    assert found == ('bind."client.compare"', "module 'server' has no interface '_helper'",
                     "interfaces of server: compare, score")


# -- unbound interfaces ------------------------------------------------------------------

def test_use_table_without_binding(tmp_path: Path) -> None:
    assert one(tmp_path, rebind("")) == (
        "modules.client.use.compare", "unbound interface 'compare'",
        'add to [bind]: "client.compare" = "server.compare"')


def test_use_call_without_binding(tmp_path: Path) -> None:
    toml = rebind("").replace('use.compare = { callstyle = "async-demand(5)" }\n', "")
    assert one(tmp_path, toml) == (
        'bind."client.compare"',
        "unbound interface 'compare': client.py line 3 calls use('compare')",
        'add to [bind]: "client.compare" = "server.compare"')


def test_use_call_of_an_interface_nobody_serves(tmp_path: Path) -> None:
    client = CLIENT + '\nalign = use("align")\n'
    assert one(tmp_path, BASE, client=client) == (
        'bind."client.align"', "unbound interface 'align': client.py line 13 calls use('align')",
        # (no bound name near it: those there are; a new user's `use.f` meant `quicksort`)
        "client's bound names: compare; or "
        'add to [bind]: "client.align" = "<module>.<interface>"')


def test_use_calls_through_polybus_module_and_aliases(tmp_path: Path) -> None:
    client = CLIENT + ('\nimport polybus as pb\nfrom polybus import use as u\n'
                       'a = pb.use("a")\nb = u("b")\nc = use(name)\nd = other.use("d")\n')
    found = errors(tmp_path, BASE, client=client)
    assert [k for k, _, _ in found] == ['bind."client.a"', 'bind."client.b"']


def test_use_calls_in_server_modules_count_only_when_imported(tmp_path: Path) -> None:
    stage = 'from polybus import use\nnext_stage = use("compare")\n\ndef work(x):\n    return x\n'
    local = 'def use(x):\n    return x\n\nv = use("compare")\n\ndef work(x):\n    return x\n'
    toml = BASE + '\n[modules.stage]\nsource = "stage.py"\n'
    # (a served module's: refused, not sent to [bind], where a run fails on it:
    # test_replica_uses.py)
    key, message, _ = one(tmp_path, toml, stage=stage)
    assert (key, message.partition(",")[0]) == (
        "modules.stage", "module 'stage' is served by replicas and calls use('compare') "
        "(stage.py line 2)")
    assert errors(tmp_path, toml, stage=local) == []


def test_loadratio_must_match_the_replica_count(tmp_path: Path) -> None:
    assert one(tmp_path, set_use('loadratio = "1:2:4"')) == (
        "modules.client.use.compare.loadratio",
        "the load ratio has 3 shares but module 'server' has 4 replicas",
        "give one share per replica, in replica order")
    assert errors(tmp_path, set_use('loadratio = "1:2:4:8"')) == []
    assert errors(tmp_path, set_use("loadratio = [1, 1, 0, 2.5]")) == []


def test_a_non_client_module_without_replication_has_one_replica(tmp_path: Path) -> None:
    toml = BASE.replace("replication = 4\n", "")
    assert errors(tmp_path, toml) == []
    assert one(tmp_path, set_use('loadratio = "1:2"').replace("replication = 4\n", ""))[1] == (
        "the load ratio has 2 shares but module 'server' has 1 replica")


def test_source_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_bytes(b"\xff\xfe def f(): pass\n")
    toml = BASE + '\n[modules.bad]\nsource = "bad.py"\n'
    key, message, _ = one(tmp_path, toml)
    assert key == "modules.bad.source"
    assert message.startswith(f"cannot read source file {str(tmp_path / 'bad.py')!r}: ")


def test_misspelt_use_call_names_the_binding_it_was_meant_for(tmp_path: Path) -> None:
    # client.py calls use("compar") while [bind] has "client.compare": the hint says so
    client = CLIENT.replace('use("compare")', 'use("compar")')
    found = one(tmp_path, BASE, client=client)
    assert found[0] == 'bind."client.compar"'
    assert found[2].startswith(
        "did you mean 'compare' (bound in [bind] as \"client.compare\")? or add to [bind]")


# -- likely mistakes that are only noted (the run goes ahead) ------------------------------

def notes(tmp_path: Path, toml: str, *, client: str = CLIENT) -> Found:
    assert errors(tmp_path, toml, client=client) == []
    config, _ = validate(str(tmp_path / "app.toml"))
    assert config is not None
    return [(n.key, n.bare_message, n.hint) for n in config.notes]


def test_a_binding_nothing_uses_is_noted_with_the_nearest_used_name(tmp_path: Path) -> None:
    toml = BASE + '"client.comparre" = "server.compare"\n'
    assert notes(tmp_path, toml) == [(
        'bind."client.comparre"',
        "module 'client' (client.py) never calls use('comparre') and has no use.comparre key: "
        "nothing uses this binding", "did you mean 'compare'?")]
    assert notes(tmp_path, BASE) == []


def test_a_binding_used_only_in_the_source_or_by_a_name_made_at_run_time_is_not_noted(
        tmp_path: Path) -> None:
    toml = BASE + '"client.extra" = "server.compare"\n'
    assert notes(tmp_path, toml, client=CLIENT + '\nextra = use("extra")\n') == []
    assert notes(tmp_path, toml, client=CLIENT + '\nname = "ex" + "tra"\nx = use(name)\n') == []


def test_a_mil_binding_written_the_other_way_round_says_so_in_mil(tmp_path: Path) -> None:
    dna = Path(__file__).resolve().parents[2] / "examples" / "dna"
    for name in ("client.py", "server.py"):
        (tmp_path / name).write_text((dna / name).read_text())
    cfg = tmp_path / "app.cfg"
    cfg.write_text((dna / "app.cfg").read_text().replace(
        "bind client compare server compare ::", "bind server compare client compare ::"))
    _, found = validate(str(cfg))
    assert [(e.key, e.hint) for e in found] == [(
        'bind."server.compare"', "write 'bind client compare server compare ::': the caller "
        "and the name it uses, then the module and interface that serve it")]
