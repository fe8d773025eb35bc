"""A mistake in an override names where the user wrote it: ``--set`` on the command line,
``overrides`` from ``polybus.run(...)``; only the shell's gets shell advice.

Validation only: a run refuses a bad configuration before it starts anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.cli.main import main
from polybus.config import validate
from polybus.config.origin import PYTHON
from polybus.errors import ConfigError
from polybus.runargs import override_strings

KEY = "modules.server.define.compare.priority"
WHY = "the priority is a Python expression over the call's parameters; "


@pytest.fixture
def app(tmp_path: Path) -> str:
    (tmp_path / "server.py").write_text("def compare(query, entry):\n    return 0\n\n\n"
                                        "def stats():\n    return 1\n")
    (tmp_path / "client.py").write_text("from polybus import use\ncompare = use('compare')\n"
                                        "\n\ndef main():\n    return compare('a', 'b')\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "server.py"\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
        '[bind]\n"client.compare" = "server.compare"\n')
    return str(tmp_path / "app.toml")


@pytest.mark.parametrize("overrides", [{KEY: 0}, [f"{KEY}=0"]], ids=["mapping", "strings"])
def test_a_python_override_is_named_overrides_with_python_advice(
        app: str, overrides: dict[str, int] | list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(app, overrides)
    e = info.value
    assert (e.file, e.key, e.bare_message) == (
        "overrides", KEY, "expected an expression string, got an integer 0")
    assert e.hint == WHY + f'pass it as a str: {{"{KEY}": "0"}}'
    assert str(e).startswith(f"overrides: {KEY}: ")
    assert "--set" not in str(e) and "shell" not in str(e)
    # The advice is right: a str is an expression string.
    assert validate(app, override_strings({KEY: "0"}), PYTHON)[1] == []


def test_the_same_override_on_the_command_line_is_still_set(
        app: str, capsys: pytest.CaptureFixture[str]) -> None:
    hint = WHY + f"""quote it for TOML inside the shell's quotes: --set '{KEY}="0"'"""
    for command in ("run", "check"):
        assert main([command, app, "--set", f"{KEY}=0"]) == 2
        err = capsys.readouterr().err
        assert f"error: --set: {KEY}: expected an expression string, got an integer 0 " \
               f"({hint})" in err, err
        assert "overrides" not in err


def test_a_define_table_made_from_python_says_how_to_add_to_the_overrides(app: str) -> None:
    # The file's define table, replaced whole by the override, leaves stats out. (A define
    # table the file lacks, made by an override, leaves every function served.)
    toml = Path(app).read_text()
    Path(app).write_text(toml.replace('source = "server.py"\n', 'source = "server.py"\n'
                                      "define.compare = {}\ndefine.stats = {}\n"))
    sets = ['modules.server.define={compare = {timeout = "5s"}}',
            'bind."client.stats"=server.stats']
    _, found = validate(app, sets, PYTHON)
    assert [(e.file, e.key, e.hint) for e in found] == [
        ("overrides", "modules.server.define",
         'add {"modules.server.define.stats": {}} to the overrides')]
    _, found = validate(app, sets)
    assert [(e.file, e.hint) for e in found] == [
        ("--set", "add --set 'modules.server.define.stats={}'")]


def test_a_malformed_python_override_is_named_overrides(app: str) -> None:
    _, found = validate(app, ["no-equals-sign", "modules.srever.replication=2"], PYTHON)
    assert [(e.file, e.key, e.hint) for e in found] == [
        ("overrides", "no-equals-sign", 'e.g. {"modules.server.replication": 8}'),
        ("overrides", "modules.srever.replication", "did you mean 'server'?")]


@pytest.mark.parametrize(("typed", "fixed"), [
    ("[3000,4,insertion]", '[3000,4,"insertion"]'),
    ("[1e3,-2,x1.5, \"a b\", inf]", '[1e3,-2,"x1.5", "a b", inf]'),
])
def test_an_array_the_shell_unquoted_says_how_to_quote_it(
        app: str, capsys: pytest.CaptureFixture[str], typed: str, fixed: str) -> None:
    # --set modules.client.args=[3000,4,insertion]: the shell ate the quotes, the value
    # was no TOML and so a string, and the error said only "expected an array".
    assert main(["check", app, "--set", f"modules.client.args={typed}"]) == 2
    err = capsys.readouterr().err
    assert "it did not read as TOML, so it was taken as a string; quote the strings in " \
           "it for TOML, inside the shell's quotes: " \
           f"--set 'modules.client.args={fixed}'" in err, err
    import tomllib

    assert type(tomllib.loads(f"v = {fixed}")["v"]) is list  # (the advice is right)


def test_a_table_for_an_array_gets_no_quoting_advice(
        app: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", app, "--set", "modules.client.args={n=3,kind=quick}"]) == 2
    err = capsys.readouterr().err
    assert "expected an array, got a string '{n=3,kind=quick}'" in err and "TOML" not in err


def test_the_quoting_hint_is_for_shells_only(app: str) -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(app, {"modules.client.args": "[1,x]"})
    assert info.value.hint is None or "shell" not in info.value.hint


@pytest.mark.parametrize(("typed", "advice"), [
    ('"[1, 2]"', None),                                   # quoted by the user: it read
    ("[" * 1500 + "x" + "]" * 1500, "no example"),        # past the parser's depth
    ("[" * 1500 + "x" + "]" * 1500 + "\nx", None),        # lines: never read as TOML
    ("[a]\nb = 2", None),
])
def test_no_quoting_advice_where_it_would_be_wrong_and_no_traceback(
        app: str, capsys: pytest.CaptureFixture[str], typed: str, advice: str | None) -> None:
    # A TOML string that reads as an array was quoted by the user (not eaten by the
    # shell); a value nested past the parser's depth raised RecursionError; one of
    # several lines got advice it could not follow.
    assert main(["check", app, "--set", f"modules.client.args={typed}"]) == 2
    err = capsys.readouterr().err
    assert "expected an array, got a string" in err and "Traceback" not in err, err[-500:]
    assert ("quote the strings in it" in err) == (advice is not None), err[-500:]
    assert "--set 'modules.client.args=" not in err


@pytest.mark.parametrize(("key", "written", "meant"), [
    ("modules.client.args", "[3000, 4]", "[3000, 4]"),
    ("modules.client.args", "[3000,4,insertion]", "[3000, 4, 'insertion']"),
    ("modules.client.kwargs", "{n = 3}", "{'n': 3}"),
    ("modules.server.define.compare.idempotent", "false", "False"),
])
def test_a_python_str_that_reads_as_toml_of_the_kind_expected_gets_the_python_form(
        app: str, key: str, written: str, meant: str) -> None:
    # docs/configuration.md: "from polybus.run ... a hint shows the Python form"; the
    # error said only "expected an array, got a string '[3000, 4]'"
    with pytest.raises(ConfigError) as info:
        polybus.run(app, {key: written})
    assert info.value.hint == ("a str is taken as the string, not read as TOML: pass the "
                               f'value itself, {{"{key}": {meant}}}'), str(info.value)
    assert "--set" not in str(info.value)


def test_a_python_str_that_is_no_value_of_the_kind_gets_no_python_form(app: str) -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(app, {"modules.client.args": "hello"})
    # (no TOML it reads as; one argument, which args holds in a list)
    assert info.value.hint == ("args is the list of the entrypoint's arguments, even of "
                               'one: {"modules.client.args": ["hello"]}'), str(info.value)


@pytest.mark.parametrize(("typed", "meant"), [("300", "[300]"), ("2.5", "[2.5]"),
                                              ("quick", '["quick"]')])
def test_one_argument_where_args_is_expected_is_shown_as_an_array(
        app: str, capsys: pytest.CaptureFixture[str], typed: str, meant: str) -> None:
    # It said only "expected an array, got an integer 300".
    assert main(["check", app, "--set", f"modules.client.args={typed}"]) == 2
    err = capsys.readouterr().err
    assert "modules.client.args: expected an array, got " in err, err
    assert ("args is the list of the entrypoint's arguments, even of one: "
            f"--set 'modules.client.args={meant}'") in err, err


def test_one_argument_in_the_file_or_from_python_is_shown_as_an_array(app: str) -> None:
    path = Path(app)
    path.write_text(path.read_text().replace('entrypoint = "main"\n',
                                             'entrypoint = "main"\nargs = 300\n'))
    [e] = validate(app)[1]
    assert e.hint == "args is the list of the entrypoint's arguments, even of one: args = [300]"
    path.write_text(path.read_text().replace("args = 300\n", ""))
    [e] = validate(app, override_strings({"modules.client.args": 300}), PYTHON)[1]
    assert e.hint == ("args is the list of the entrypoint's arguments, even of one: "
                      '{"modules.client.args": [300]}'), e.hint
    [e] = validate(app, override_strings({"modules.client.args": {"n": 3}}), PYTHON)[1]
    assert e.hint is not None and "kwargs" in e.hint, e.hint
