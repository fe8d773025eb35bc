"""Call styles."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import parse_callstyle
from polybus.config.model import CallStyle
from polybus.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    ("sync", CallStyle("sync")),
    ("async", CallStyle("async")),
    ("async-demand(5)", CallStyle("async-demand", 5)),
    ("async-demand(1)", CallStyle("async-demand", 1)),
    ("async-demand( 12 )", CallStyle("async-demand", 12)),
    ("async-demand(auto)", CallStyle("async-demand", None)),
    (" async ", CallStyle("async")),
])
def test_accepted(text: str, expected: CallStyle) -> None:
    assert parse_callstyle(text) == expected


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(5)", "async-demand(auto)"])
def test_round_trip(style: str) -> None:
    assert str(parse_callstyle(style)) == style


@pytest.mark.parametrize("bad", ["Sync", "asynch", "async-demand", "demand(5)", "", "async()"])
def test_unknown(bad: str) -> None:
    with pytest.raises(ConfigError, match="unknown call style") as info:
        parse_callstyle(bad)
    assert info.value.hint is not None
    assert "async-demand(N)" in info.value.hint and "async-demand(auto)" in info.value.hint


@pytest.mark.parametrize(("typo", "meant"), [
    ("asynch", "async"), ("snyc", "sync"), ("async_demand(4)", "async-demand(4)"),
    ("async-demnd(auto)", "async-demand(auto)")])
def test_a_near_miss_is_named(typo: str, meant: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_callstyle(typo)
    assert f"did you mean {meant!r}?" in (info.value.hint or "")


def test_a_wrong_choice_of_a_string_key_is_named(tmp_path: Path) -> None:
    from polybus.config import validate

    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    (tmp_path / "app.toml").write_text(
        '[modules.s]\nsource = "s.py"\ntransport = "shmm"\n'
        '[modules.c]\nsource = "c.py"\nentrypoint = "main"\n')
    _, errors = validate(tmp_path / "app.toml", ())
    assert any("did you mean 'shm'?" in str(e) for e in errors), errors


@pytest.mark.parametrize(("typo", "meant"), [
    ("Async", "async"), ("SYNC", "sync"), ("ASYNC-DEMAND(4)", "async-demand(4)"),
    ("Asynch", "async")])
def test_a_wrong_case_is_named_before_a_near_spelling(typo: str, meant: str) -> None:
    # "Async" was answered "did you mean 'sync'?": closer in spelling, not what was meant.
    with pytest.raises(ConfigError) as info:
        parse_callstyle(typo)
    assert (info.value.hint or "").startswith(f"did you mean {meant!r}?")


@pytest.mark.parametrize(("line", "key", "got", "meant"), [
    ('transport = "SHM"', "modules.s.transport", "expected one of 'tcp', 'ipc', 'shm', got 'SHM'",
     "shm"),
    ('use.f = { transport = "Ipc" }', "modules.c.use.f.transport",
     "expected one of 'tcp', 'ipc', 'shm', got 'Ipc'", "ipc"),
    ('use.f = { balance = "STEAL" }', "modules.c.use.f.balance",
     "expected one of 'none', 'steal', 'least', got 'STEAL'", "steal"),
    ('use.f = { callstyle = "Async" }', "modules.c.use.f.callstyle",
     "unknown call style 'Async'", "async"),
])
def test_a_wrong_case_choice_value_in_the_file_gets_did_you_mean(
        tmp_path: Path, line: str, key: str, got: str, meant: str) -> None:
    # transport = "SHM" listed the choices and left the user to spot the case.
    from polybus.config import validate

    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    module = "s" if key.startswith("modules.s.") else "c"
    toml = ('[modules.s]\nsource = "s.py"\n[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
            '[bind]\n"c.f" = "s.f"\n').replace(f'source = "{module}.py"\n',
                                               f'source = "{module}.py"\n{line}\n')
    path = tmp_path / "app.toml"
    path.write_text(toml)
    _, errors = validate(path, ())
    assert [(e.file, e.key, e.bare_message, (e.hint or "").split("?")[0] + "?")
            for e in errors] == [(str(path), key, got, f"did you mean {meant!r}?")]
    line = toml.splitlines().index(line) + 1 if line in toml.splitlines() else None
    assert line is not None and errors[0].line == line
    assert str(errors[0]).startswith(f"{path}:{line}: {key}: {got} (did you mean {meant!r}?")


@pytest.mark.parametrize("bad", ["async-demand(0)", "async-demand(-2)", "async-demand(x)",
                                 "async-demand(1.5)", "async-demand()"])
def test_bad_window(bad: str) -> None:
    with pytest.raises(ConfigError, match="bad window") as info:
        parse_callstyle(bad)
    assert "'sync'" in (info.value.hint or "")


def test_not_a_string() -> None:
    with pytest.raises(ConfigError, match="expected a call style string"):
        parse_callstyle(5)
