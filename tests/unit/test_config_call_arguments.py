"""`check` (and `run`, which validates the same) refuses a call of a use()d name that the
served function cannot take (config/callargs.py): a new user's ``render(t, gian=2.0)``
for ``def render(tile, gain)`` passed `check` and failed only once `run` made it."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

TOML = """\
[modules.server]
source = "server.py"
replication = 1
EXTRA

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.render" = "server.render"
"""


def _errors(tmp_path: Path, signature: str, call: str, extra: str = "",
            decorator: str = "", after: str = "") -> list[tuple[str | None, int | None, str,
                                                                str | None]]:
    (tmp_path / "server.py").write_text(
        f"import functools\n\n\n{decorator}def render{signature}:\n    return 0\n{after}")
    (tmp_path / "client.py").write_text(
        f'from polybus import use\nrender = use("render")\n\n\ndef main(t=0):\n'
        f"    return {call}\n")
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("EXTRA", extra))
    config, found = validate(str(path))
    assert (config is None) == bool(found)
    return [(e.file, e.line, e.bare_message, e.hint) for e in found]


def _said(tmp_path: Path, call: str, signature: str, error: str, line: int = 4
          ) -> str:
    return (f"the call {call} does not fit render{signature}, defined at "
            f"{tmp_path / 'server.py'}:{line}: {error}")


def test_a_misspelt_keyword_is_refused_at_the_call_with_the_signature(tmp_path: Path) -> None:
    [(file, line, message, hint)] = _errors(tmp_path, "(tile, gain)", "render(t, gian=2.0)")
    assert (file, line) == (str(tmp_path / "client.py"), 6)
    assert message == _said(tmp_path, "render(t, gian=2.0)", "(tile, gain)",
                            "got an unexpected keyword argument 'gian'")
    assert hint == "did you mean 'gain'?"


@pytest.mark.parametrize(("signature", "call", "error"), [
    ("(tile, gain)", "render(t)", "missing a required argument: 'gain'"),
    ("(tile, gain=1.0)", "render(t, 2, 3)", "too many positional arguments"),
    ("(tile, *, gain)", "render(t, 2)", "too many positional arguments"),
    ("(tile, *, gain)", "render(t)", "missing a required argument: 'gain'"),
    ("(tile, gain=1.0)", "render(t, tile=2)", "multiple values for argument 'tile'"),
    ("(tile, /, gain=1.0)", "render(tile=t)",
     "'tile' parameter is positional only, but was passed as a keyword"),
    ("(tile, *rows)", "render(t, rows=1)", "got an unexpected keyword argument 'rows'"),
])
def test_what_the_function_cannot_take_is_refused(tmp_path: Path, signature: str, call: str,
                                                  error: str) -> None:
    [(_, _, message, _)] = _errors(tmp_path, signature, call)
    assert message == _said(tmp_path, call, signature, error)


@pytest.mark.parametrize(("signature", "call"), [
    ("(tile, gain=1.0)", "render(t)"),
    ("(tile, gain=1.0)", "render(t, 2)"),
    ("(tile, gain=1.0)", "render(gain=2, tile=t)"),
    ("(tile, *, gain=1.0, scale)", "render(t, scale=2)"),
    ("(tile, *rows)", "render(t, 1, 2, 3)"),              # *args takes any number more
    ("(tile, **options)", "render(t, gian=2.0, anything=1)"),  # **kwargs any keyword
    ("(tile, /, **options)", "render(t, tile=1)"),
    ("(*args, **kwargs)", "render()"),
])
def test_what_the_function_takes_is_not_refused(tmp_path: Path, signature: str,
                                                call: str) -> None:
    assert _errors(tmp_path, signature, call) == []


def test_a_decorated_or_rebound_function_is_not_checked(tmp_path: Path) -> None:
    # (what a replica calls may take other arguments than the def says)
    assert _errors(tmp_path, "(tile, gain)", "render(t, gian=2.0)",
                   decorator="@functools.lru_cache\n") == []
    assert _errors(tmp_path, "(tile, gain)", "render(t, gian=2.0)",
                   after="\n\nrender = functools.partial(render, gain=1)\n") == []


@pytest.mark.parametrize("extra", [
    'define.render = { cache = ["tile"] }',
    'define.render = { priority = "gain" }',
])
def test_configuration_never_changes_what_is_refused(tmp_path: Path, extra: str) -> None:
    [(_, _, message, hint)] = _errors(tmp_path, "(tile, gain)", "render(t, gian=2.0)", extra)
    assert message.endswith("got an unexpected keyword argument 'gian'")
    assert hint == "did you mean 'gain'?"
    assert _errors(tmp_path, "(tile, gain)", "render(t, gain=2.0)", extra) == []


def test_several_unknown_keywords_and_a_name_bound_to_another_interface(
        tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("def score(tile, gain, offset=0):\n    return 0\n")
    (tmp_path / "client.py").write_text(
        'from polybus import use\nrate = use("rate")\n\n\ndef main(t=0):\n'
        "    return rate(t, gian=1, ofset=2)\n")
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("EXTRA", "").replace('"client.render" = "server.render"',
                                                      '"client.rate" = "server.score"'))
    _, found = validate(str(path))
    [e] = found
    assert e.bare_message == (
        "the call rate(t, gian=1, ofset=2) does not fit score(tile, gain, offset=0) "
        f"(server.score, bound as rate), defined at {tmp_path / 'server.py'}:1: got "
        "unexpected keyword arguments 'gian', 'ofset'")
    assert e.hint == "did you mean 'gain' for 'gian', 'offset' for 'ofset'?"


def test_calls_of_several_bindings_are_refused_in_line_order(tmp_path: Path) -> None:
    """The misfits come in the client's line order, not the order of the [bind] table
    (score's call on line 5 was said after render's on line 6)."""
    (tmp_path / "server.py").write_text(
        "def render(tile, gain):\n    return 0\n\n\ndef score(x):\n    return 0\n")
    (tmp_path / "client.py").write_text(
        "from polybus import use\n\n\ndef main(t=0):\n    s = score(t, 2)\n"
        "    return render(t, gian=2.0), s\n\n\n"
        'render = use("render")\nscore = use("score")\n')
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("EXTRA", "").replace(
        '"client.render" = "server.render"',
        '"client.render" = "server.render"\n"client.score" = "server.score"'))
    _, found = validate(str(path))
    assert [(e.file, e.line) for e in found] == [(str(tmp_path / "client.py"), 5),
                                                 (str(tmp_path / "client.py"), 6)]
