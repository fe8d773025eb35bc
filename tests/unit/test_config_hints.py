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
args = [["ACGT"], "ACGT"]
use.compare = { callstyle = "async" }

[bind]
"client.compare" = "server.compare"
'''

Found = list[tuple[str | None, str | None, str, str | None]]


def errors(tmp_path: Path, toml: str = BASE, overrides: tuple[str, ...] = (),
           server: str = SERVER) -> Found:
    """(file as the user sees it, key, message, hint) of every mistake."""
    (tmp_path / "server.py").write_text(server)
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


@pytest.mark.parametrize("example", ["dna", "rudy"])
def test_the_example_comment_command_is_valid(example: str) -> None:
    """The --set an example's comment suggests is one polybus accepts."""
    app = Path(__file__).resolve().parents[2] / "examples" / example / "app.toml"
    lines = [ln for ln in app.read_text().splitlines() if "--set '" in ln]
    assert lines
    for line in lines:
        sets = line.split("--set '", 1)[1].rsplit("'", 1)[0]
        assert validate(app, [sets])[1] == []


@pytest.mark.parametrize(("module", "item", "hint"), [
    ("client", 'balance = "steal"', "'balance' is an option of a used interface: "
     "modules.client.use.compare.balance"),
    ("client", 'callstyle = "sync"', "'callstyle' is an option of a used interface: "
     "modules.client.use.compare.callstyle"),
    ("server", 'priority = "1"', "'priority' is an option of a defined interface: "
     "modules.server.define.compare.priority"),
    ("server", "cache = ['entry']", "'cache' is an option of a defined interface: "
     "modules.server.define.compare.cache"),
    ("client", "timeout = 1", "'timeout' is an option of a used interface: "
     "modules.client.use.compare.timeout, or of a defined interface: "
     "define.<iface>.timeout of the module that serves it"),
])
def test_an_interface_option_on_the_module_says_where_it_belongs(
        tmp_path: Path, module: str, item: str, hint: str) -> None:
    toml = BASE.replace(f"[modules.{module}]\n", f"[modules.{module}]\n{item}\n")
    assert errors(tmp_path, toml) == [
        ("file", f"modules.{module}.{item.split()[0]}", f"unknown key {item.split()[0]!r}", hint)]


def test_the_interfaces_are_named_from_bind_when_the_module_has_no_table(tmp_path: Path) -> None:
    toml = BASE.replace('use.compare = { callstyle = "async" }\n', "")
    assert errors(tmp_path, toml, ("modules.client.aggregate=8",)) == [
        ("--set", "modules.client.aggregate", "unknown key 'aggregate'",
         "'aggregate' is an option of a used interface: modules.client.use.compare.aggregate")]
    toml = BASE.replace("[bind]", "[zzz]")
    assert ("file", "modules.client.linger", "unknown key 'linger'",  # (from its use table)
            "'linger' is an option of a used interface: modules.client.use.compare.linger"
            ) in errors(tmp_path, toml.replace("use.compare", "linger = 1\nuse.compare"))


def test_a_misspelt_module_key_still_gets_the_nearest_name(tmp_path: Path) -> None:
    toml = BASE.replace("replication = 2", "replicaton = 2")
    assert ("file", "modules.server.replicaton", "unknown key 'replicaton'",
            "did you mean 'replication'?") in errors(tmp_path, toml)


def test_mandelbrot_comment_option_is_valid_where_it_says() -> None:
    app = Path(__file__).resolve().parents[2] / "examples" / "mandelbrot" / "app.toml"
    assert "modules.client.use.mandel_row.balance=steal" in app.read_text()
    assert validate(app, ["modules.client.use.mandel_row.balance=steal"])[1] == []


def test_an_unbound_use_table_made_by_set_blames_set_and_names_the_nearest(
        tmp_path: Path) -> None:
    assert errors(tmp_path, overrides=("modules.client.use.compares.callstyle=sync",)) == [
        ("--set", "modules.client.use.compares", "unbound interface 'compares'",
         "did you mean 'compare' (bound in [bind] as \"client.compare\")? or add to [bind]: "
         '"client.compares" = "<module>.<interface>"')]


def test_an_unbound_use_table_in_the_file_blames_the_file(tmp_path: Path) -> None:
    toml = BASE.replace('use.compare = { callstyle = "async" }',
                        'use.compare = { callstyle = "async" }\nuse.compar = { callstyle = "sync" }')
    assert errors(tmp_path, toml) == [
        ("file", "modules.client.use.compar", "unbound interface 'compar'",
         "did you mean 'compare' (bound in [bind] as \"client.compare\")? or add to [bind]: "
         '"client.compar" = "<module>.<interface>"')]


def test_a_set_into_a_use_table_of_the_file_leaves_the_file_blamed(tmp_path: Path) -> None:
    toml = BASE.replace('use.compare = { callstyle = "async" }',
                        'use.compare = { callstyle = "async" }\nuse.other = { callstyle = "sync" }')
    assert [f for f, *_ in errors(tmp_path, toml, ("modules.client.use.other.linger=1",))] == [
        "file"]


def test_a_function_left_out_by_the_define_table_says_so(tmp_path: Path) -> None:
    # "has no interface 'stats' (interfaces of server: compare)" while server.py plainly
    # has a stats(): the define table is what limits what the module serves.
    server = SERVER + "\n\ndef stats():\n    return 1\n"
    found = errors(tmp_path, overrides=('bind."client.stats"=server.stats',), server=server)
    assert found == [("--set", 'bind."client.stats"',
                      "module 'server' does not serve 'stats': a module with a define "
                      "table serves only the interfaces it lists (compare)",
                      "add define.stats = {} to [modules.server]")]
    # A name the module does not have at all is still a spelling question.
    found = errors(tmp_path, overrides=('bind."client.stats"=server.comprae',), server=server)
    assert found[0][2:] == ("module 'server' has no interface 'comprae'",
                            "did you mean 'compare'?")


def test_a_misspelt_function_left_out_by_the_define_table_is_suggested(tmp_path: Path) -> None:
    # With no define table "server.statz" got "did you mean 'stats'?"; with one that lists
    # compare alone it got "(interfaces of server: compare)", no suggestion, though
    # server.py has a stats().
    server = SERVER + "\n\ndef stats():\n    return 1\n"
    found = errors(tmp_path, overrides=('bind."client.stats"=server.statz',), server=server)
    assert found[0][2:] == (
        "module 'server' has no interface 'statz'",
        "did you mean 'stats'? its define table lists only compare, not that function: "
        "add define.stats = {} to [modules.server]")


def test_a_define_table_made_by_set_adds_options_and_the_module_serves_the_rest(
        tmp_path: Path) -> None:
    # --set 'modules.server.define.compare.timeout=5s' on a module the file gives no define
    # table made that table list all the module served: stats, bound in [bind], was not
    # served any more. A table only --set made configures what it names.
    server = SERVER + "\n\ndef stats():\n    return 1\n"
    toml = BASE.replace('define.compare = { priority = "len(query)" }\n', "") + (
        '"client.stats" = "server.stats"\n')
    sets = ("modules.server.define.compare.timeout=5s",)
    assert errors(tmp_path, toml, sets, server) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    define = cfg.modules["server"].define
    assert list(define) == ["compare", "stats"]
    assert (define["compare"].timeout, define["stats"].timeout) == (5.0, None)
    # The file's own define table still lists what the module serves, whatever --set adds.
    toml = BASE + '"client.stats" = "server.stats"\n'
    found = errors(tmp_path, toml, sets, server)
    assert found == [("file", 'bind."client.stats"',
                      "module 'server' does not serve 'stats': a module with a define table "
                      "serves only the interfaces it lists (compare)",
                      "add define.stats = {} to [modules.server]")]
    # And a --set that replaces the file's table whole is blamed for what it leaves out.
    whole = ('modules.server.define={compare = {timeout = "5s"}}',)
    found = errors(tmp_path, toml, whole, server)
    assert found == [("--set", "modules.server.define",
                      "module 'server' does not serve 'stats': a module with a define table "
                      "serves only the interfaces it lists (compare); "
                      'bind."client.stats" binds it',
                      "add --set 'modules.server.define.stats={}'")]
    assert errors(tmp_path, toml, (*whole, "modules.server.define.stats={}"), server) == []


@pytest.mark.parametrize(("sets", "key", "message"), [
    (("modules.client.use.compare.linger=5ms",), "modules.client.use.compare.linger",
     "linger is how long a batch may wait to fill, and this binding does not aggregate"),
    (("modules.server.define.compare.prefetch=all",), "modules.server.define.compare.prefetch",
     "prefetch pushes cached operands, and this interface caches none"),
    (("modules.client.use.compare.callstyle=sync", "modules.client.use.compare.aggregate=8"),
     "modules.client.use.compare.aggregate",
     "aggregate batches async calls, and this binding's calls are sync (each waits for its "
     "answer, so none travel together)"),
])
def test_an_option_that_does_nothing_where_it_is_is_a_warning(
        tmp_path: Path, sets: tuple[str, ...], key: str, message: str) -> None:
    # check said ok and the run ignored it: a linger with no batches to wait for.
    assert errors(tmp_path, overrides=sets) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    assert [(n.file, n.key, n.bare_message) for n in cfg.notes] == [("--set", key, message)]
    fixed = (*sets, "modules.client.use.compare.aggregate=8",
             'modules.server.define.compare.cache="auto"',
             "modules.client.use.compare.callstyle=async")
    cfg, _ = validate(str(tmp_path / "app.toml"), fixed)
    assert cfg is not None and cfg.notes == ()


def test_a_misspelt_define_name_is_one_error_not_one_per_binding(tmp_path: Path) -> None:
    toml = BASE.replace("define.compare", "define.comprae")
    assert errors(tmp_path, toml) == [
        ("file", "modules.server.define.comprae",
         "interface 'comprae' is not a top-level function of server.py",
         "did you mean 'compare'?")]


ENTRY = "the entrypoint main(queries, entry) cannot take these arguments: "


@pytest.mark.parametrize(("sets", "key", "why", "hint"), [
    (("modules.client.args=[1, 2, 3]",), "modules.client.args",
     "too many positional arguments", None),
    (("modules.client.args=[1]",), "modules.client.args",
     "missing a required argument: 'entry'", None),
    (("modules.client.kwargs={entyr = 1}", "modules.client.args=[1, 2]"),
     "modules.client.kwargs", "got an unexpected keyword argument 'entyr'",
     "did you mean 'entry'?"),
])
def test_entrypoint_arguments_that_do_not_fit_are_found_by_check(
        tmp_path: Path, sets: tuple[str, ...], key: str, why: str, hint: str | None) -> None:
    # check said ok; run ended in a TypeError traceback from polybus's runner.
    assert errors(tmp_path, overrides=sets) == [("--set", key, ENTRY + why, hint)]
    assert errors(tmp_path, overrides=("modules.client.args=[1]",
                                       "modules.client.kwargs={entry = 2}")) == []


def test_tls_files_that_do_not_exist_are_found_by_check(tmp_path: Path) -> None:
    # check said ok; the run stopped at its first connection ("tls.cert: no such file").
    toml = BASE + '\n[cluster]\ntls = { cert = "certs/a.pem", key = "k.pem", ca = "ca.pem" }\n'
    (tmp_path / "k.pem").write_text("")
    (tmp_path / "ca.pem").write_text("")
    assert errors(tmp_path, toml) == [
        ("file", "cluster.tls.cert", "cert file 'certs/a.pem' not found (looked for "
         f"'{tmp_path.resolve() / 'certs' / 'a.pem'}')", None)]


def test_a_priority_over_a_parameter_whose_default_is_not_a_literal_is_a_warning(
        tmp_path: Path) -> None:
    # The client binds a call's arguments without importing the module: a default it
    # cannot read (SIZE) fails a call that leaves the parameter out.
    server = "SIZE = 3\n\n\ndef compare(query, entry, n=SIZE, k=2):\n    return 0\n"
    sets = ('modules.server.define.compare.priority="len(query) * n * k"',)
    assert errors(tmp_path, overrides=sets, server=server) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    assert [(n.file, n.key, n.bare_message, n.hint) for n in cfg.notes] == [(
        "--set", PRIORITY, "the priority reads 'n', whose default SIZE is not a literal: the "
        "client does not import the module, so a call that leaves n out fails there",
        "pass n in every call, or give it a literal default")]
    cfg, _ = validate(str(tmp_path / "app.toml"), ('modules.server.define.compare.priority="k"',))
    assert cfg is not None and cfg.notes == ()


def test_a_queue_smaller_than_another_define_of_its_module_asks_for_is_a_warning(
        tmp_path: Path) -> None:
    # A replica has one queue, as long as the largest any define asks for: slow's
    # queue = 1 with overflow = "reject" never rejected (compare kept the default 1000).
    server = SERVER + "\n\ndef slow(query):\n    return 0\n"
    sets = ('modules.server.define.slow={ queue = 1, overflow = "reject" }',)
    assert errors(tmp_path, overrides=sets, server=server) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    # (the note on slow's overflow: the next test)
    assert [(n.file, n.key, n.bare_message, n.hint) for n in cfg.notes
            if n.key.endswith(".queue")] == [(
        "--set", "modules.server.define.slow.queue",
        "queue = 1 has no effect: a replica of module 'server' has one queue for all its "
        "interfaces, bounded by the largest queue any of its defines asks for (1000, the "
        "default, of define.compare), so overflow = \"reject\" refuses a call only when 1000 "
        "wait", "give every define of module 'server' queue = 1, or put slow in a module of "
        "its own: another [modules.<key>] with the same source")]
    both = 'modules.server.define.compare.overflow="reject"'  # (see the next test)
    for fixed in ((*sets, "modules.server.define.compare.queue=1", both),
                  ('modules.server.define.slow={ queue = 1000, overflow = "reject" }', both)):
        cfg, _ = validate(str(tmp_path / "app.toml"), fixed)
        assert cfg is not None and cfg.notes == ()


def test_reject_on_one_define_of_a_module_is_a_warning(tmp_path: Path) -> None:
    # One queue per replica: slow's overflow = "reject" made a full queue refuse calls
    # to compare as well, which asked for the default "block", and nothing said so.
    server = SERVER + "\n\ndef slow(query):\n    return 0\n"
    sets = ('modules.server.define.slow={ overflow = "reject" }',)
    assert errors(tmp_path, overrides=sets, server=server) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    assert [(n.file, n.key, n.bare_message, n.hint) for n in cfg.notes] == [(
        "--set", "modules.server.define.slow.overflow",
        'overflow = "reject" applies to the whole queue of each replica of module \'server\', '
        "which all its interfaces share: when it is full, calls to compare are refused too "
        '(BusyError), though they ask for "block"',
        'set overflow = "reject" on every define of module \'server\', or put slow in a module '
        "of its own: another [modules.<key>] with the same source")]
    fixed = (*sets, 'modules.server.define.compare.overflow="reject"')
    cfg, _ = validate(str(tmp_path / "app.toml"), fixed)
    assert cfg is not None and cfg.notes == ()


def test_a_zero_share_with_nothing_to_feed_its_replica_is_a_warning(tmp_path: Path) -> None:
    # loadratio = "1:0" was taken silently and server-1 idled. A 0 is meaningful where
    # stealing or a migration path brings calls to the replica (CORD's line fed at its
    # head), so it is a warning, not an error.
    sets = ('modules.client.use.compare.loadratio="1:0"',)
    assert errors(tmp_path, overrides=sets) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    assert [(n.file, n.key, n.bare_message, n.hint) for n in cfg.notes] == [(
        "--set", "modules.client.use.compare.loadratio",
        "replica 'server-1' of module 'server' has share 0, and nothing moves calls to it "
        "(no balance = \"steal\", no migration path through it): it gets none of these calls",
        "give every replica a share > 0, or add balance = \"steal\"; a 0 is for a replica "
        "that calls reach by stealing or migration")]
    for fed in ('modules.client.use.compare.balance="steal"',
                'modules.server.replication="a#b"'):
        cfg, _ = validate(str(tmp_path / "app.toml"), (*sets, fed))
        assert cfg is not None and cfg.notes == (), fed


@pytest.mark.parametrize(("written", "hint"), [
    ("servre.py", "did you mean 'server.py'?"),
    ("server", "did you mean 'server.py'?"),
    ("./Server.py", "did you mean 'server.py'?"),
    ("nothing_like_it.py", None),
    ("sevrer.py", "did you mean 'server.py'?"),
    ("srever.py", "did you mean 'server.py'?"),
    ("reserve.py", None),  # (as close as 'osexit.py' was offered for 'nonexist.py')
])
def test_a_missing_source_file_gets_the_nearest_file_beside_it(
        tmp_path: Path, written: str, hint: str | None) -> None:
    toml = BASE.replace('source = "server.py"', f'source = "{written}"')
    [(_, key, message, got)] = errors(tmp_path, toml)
    assert (key, message.split(" (")[0], got) == (
        "modules.server.source", f"source file {written!r} not found", hint)


def test_thousands_of_local_replicas_are_a_warning(tmp_path: Path) -> None:
    # A new user's replication = 5000 on 2 CPUs was "ok": 5000 processes to start.
    sets = ("modules.server.replication=5000",)
    assert errors(tmp_path, overrides=sets) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    (note,) = cfg.notes
    assert (note.file, note.key) == ("--set", "modules.server.replication")
    assert note.bare_message.startswith("5000 replicas on a machine with ")
    assert note.bare_message.endswith(", 5000 of them for module 'server'")
    fine = ("modules.server.replication=8",)
    cfg, _ = validate(str(tmp_path / "app.toml"), fine)
    assert cfg is not None and cfg.notes == ()


def test_an_aggregate_size_past_max_frame_is_a_warning(tmp_path: Path) -> None:
    # A new user's aggregate = "1TiB" was taken silently: a batch is one frame.
    sets = ('modules.client.use.compare.aggregate="1TiB"',)
    assert errors(tmp_path, overrides=sets) == []
    cfg, _ = validate(str(tmp_path / "app.toml"), sets)
    assert cfg is not None
    (note,) = cfg.notes
    assert (note.file, note.key, note.bare_message) == (
        "--set", "modules.client.use.compare.aggregate",
        "aggregate = 1,099,511,627,776 bytes is more than a batch can hold: a batch is one "
        "frame, cut at cluster.max_frame (1,073,741,824 bytes)")
    cfg, _ = validate(str(tmp_path / "app.toml"), ('modules.client.use.compare.aggregate="1GiB"',))
    assert cfg is not None and cfg.notes == ()

