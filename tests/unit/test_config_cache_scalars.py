"""``define.<iface>.cache`` naming a parameter annotated as a scalar: a warning, since
only arrays and bytes are sent once and named by content hash (client/naming.py
``content_key``); an int, a float, a bool, a str or None goes with every call by value
whatever ``cache`` says. (A name that is no parameter at all is an error:
test_config_errors_sources.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

CLIENT = '''\
from polybus import use

score = use("score")


def main():
    return score(b"", 1)
'''
TOML = '''\
[modules.server]
source = "server.py"
define.score = { cache = ["data", "n"] }

[modules.client]
source = "client.py"
entrypoint = "main"
use.score = { callstyle = "async" }

[bind]
"client.score" = "server.score"
'''
KEY = "modules.server.define.score.cache"
HINT = 'cache the array or bytes parameters, or cache = "auto" for every one of 64 KiB or more'


def _notes(tmp_path: Path, signature: str, toml: str = TOML, sets: tuple[str, ...] = ()
           ) -> list[tuple[str | None, str | None, str, str | None]]:
    (tmp_path / "server.py").write_text(
        f"from typing import Optional\nimport numpy as np\n\n\ndef score{signature}:\n"
        "    return 0\n")
    # (n by keyword where it is keyword-only: check refuses a call that does not fit)
    (tmp_path / "client.py").write_text(
        CLIENT.replace("1)", "n=1)") if "*, n" in signature else CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    cfg, errors = validate(str(path), sets)
    assert errors == [] and cfg is not None
    return [("file" if n.file == str(path) else n.file, n.key, n.bare_message, n.hint)
            for n in cfg.notes]


def _said(name: str, annotation: str, where: str = "file") -> tuple[str, str, str, str]:
    return (where, KEY, f"cache parameter {name!r} of score() is annotated {annotation}, "
            "not an array or bytes: only those are sent once and then named by content "
            "hash, so its argument goes with every call by value, as it would uncached "
            "(caching it sends nothing less)", HINT)


@pytest.mark.parametrize(("signature", "annotation"), [
    ("(data, n: int)", "int"),
    ("(data, n: float = 1.0)", "float"),
    ("(data, n: bool = False)", "bool"),
    ("(data, *, n: str)", "str"),
    ("(data, n: None = None)", "None"),
    ("(data, n: int | None = None)", "int | None"),
    ("(data, n: Optional[float] = None)", "Optional[float]"),
    ("(data, n: 'int')", "'int'"),
])
def test_a_cached_parameter_annotated_as_a_scalar_is_a_warning(
        tmp_path: Path, signature: str, annotation: str) -> None:
    assert _notes(tmp_path, signature) == [_said("n", annotation)]


@pytest.mark.parametrize("signature", [
    "(data, n)",                            # no annotation: anything may come
    "(data: np.ndarray, n: bytes)",
    "(data, n: 'np.ndarray')",
    "(data, n: int | np.ndarray)",          # an array may come
    "(data, n: Optional[np.ndarray] = None)",
    "(data, n=0)",                          # a default says nothing of what calls pass
])
def test_a_cached_parameter_that_may_be_an_array_or_bytes_is_not(
        tmp_path: Path, signature: str) -> None:
    assert _notes(tmp_path, signature) == []


def test_star_args_annotated_as_a_scalar_and_an_override_are_said_where_written(
        tmp_path: Path) -> None:
    assert _notes(tmp_path, "(data, *rows: float)", TOML.replace('"n"', '"rows"')) == [
        _said("rows", "float")]
    assert _notes(tmp_path, "(data: bytes, n: int)", TOML.replace(', "n"', ""),
                  sets=('modules.server.define.score.cache=["data", "n"]',)) == [
        _said("n", "int", where="--set")]
    assert _notes(tmp_path, "(data, n: int)",
                  TOML.replace('cache = ["data", "n"]', 'cache = "auto"')) == []


@pytest.mark.parametrize(("cache", "hint"), [
    ('"data"', 'parameter names go in an array, even one: cache = ["data"]'),
    ('"data, n"', 'parameter names go in an array, even one: cache = ["data", "n"]'),
    ('"Auto"', "did you mean 'auto'?"),
    ("5", None),
])
def test_a_string_of_names_for_cache_is_refused_with_the_array_it_meant(
        tmp_path: Path, cache: str, hint: str | None) -> None:
    # The trial's cache = "m" was refused with no word of what to write instead.
    (tmp_path / "server.py").write_text("def score(data, n):\n    return 0\n")
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace('cache = ["data", "n"]', f"cache = {cache}"))
    _, errors = validate(str(path))
    assert [(e.key, e.hint) for e in errors] == [(KEY, hint)]
    assert errors[0].bare_message.startswith(
        "expected 'auto' or an array of parameter names, got ")
