"""``--set`` overrides: parsing the key and the value."""

from __future__ import annotations

from typing import Any

import pytest

from polybus.config import parse_override
from polybus.config.overrides import apply_overrides
from polybus.errors import ConfigError


@pytest.mark.parametrize(("text", "path", "value"), [
    ("modules.server.replication=8", ["modules", "server", "replication"], 8),
    ("a.b=1.5", ["a", "b"], 1.5),
    ('a.b="x y"', ["a", "b"], "x y"),
    ("a.b='lit'", ["a", "b"], "lit"),
    ("a.b=[1, 2]", ["a", "b"], [1, 2]),
    ("a.b=true", ["a", "b"], True),
    ("a.b={ c = 1 }", ["a", "b"], {"c": 1}),
    ("modules.client.use.compare.callstyle=async-demand(5)",
     ["modules", "client", "use", "compare", "callstyle"], "async-demand(5)"),
    ("modules.s.replication=harvey,bugs", ["modules", "s", "replication"], "harvey,bugs"),
    ("modules.s.replication=a(oc=(load>=10))#b:[1/2]", ["modules", "s", "replication"],
     "a(oc=(load>=10))#b:[1/2]"),
    ("modules.s.replication=1#2", ["modules", "s", "replication"], "1#2"),
    ('a.b="x#y"', ["a", "b"], "x#y"),
    ("a.b=64KiB", ["a", "b"], "64KiB"),
    ("a.b=", ["a", "b"], ""),
    ("a.b= 5 ", ["a", "b"], 5),
    ("a.b=x=y", ["a", "b"], "x=y"),
    (' bind."client.compare" = server.compare', ["bind", "client.compare"], "server.compare"),
    ("a . b=1", ["a", "b"], 1),
])
def test_parse(text: str, path: list[str], value: Any) -> None:
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize(("text", "message"), [
    ("modules.server.replication", "expected KEY=VALUE, got 'modules.server.replication'"),
    ("=5", "bad key path ''"),
    ("a..b=5", "bad key path 'a..b'"),
    ("a b=5", "bad key path 'a b'"),
    ('a."b=5', "bad key path 'a.\"b'"),
    ("a.#b=5", "bad key path 'a.#b'"),
])
def test_bad(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_override(text)
    assert info.value.file == "--set"
    assert info.value.bare_message == message
    assert info.value.key == text.partition("=")[0].strip() or text


def test_apply_creates_tables_and_records_what_it_wrote() -> None:
    doc: dict[str, Any] = {"modules": {"s": {"source": "s.py"}}}
    written, errors = apply_overrides(doc, ["modules.s.define.f.pool=4", "cluster.engine=mpi"])
    assert errors == []
    # (with the tables made on the way: a mistake there is the override's)
    assert written == ["modules.s.define", "modules.s.define.f", "modules.s.define.f.pool",
                       "cluster", "cluster.engine"]
    assert doc == {"modules": {"s": {"source": "s.py", "define": {"f": {"pool": 4}}}},
                   "cluster": {"engine": "mpi"}}


def test_apply_in_order_the_last_wins() -> None:
    doc: dict[str, Any] = {"x": 1}
    apply_overrides(doc, ["x=2", "x=3"])
    assert doc == {"x": 3}


def test_apply_a_single_string() -> None:
    doc: dict[str, Any] = {}
    assert apply_overrides(doc, "x=2") == (["x"], [])
    assert doc == {"x": 2}


def test_apply_bind_keys_join_into_one_quoted_key() -> None:
    doc: dict[str, Any] = {"bind": {"client.compare": "a.compare"}}
    written, _ = apply_overrides(doc, ["bind.client.compare=b.compare"])
    assert doc == {"bind": {"client.compare": "b.compare"}}
    assert written == ['bind."client.compare"']


def test_apply_through_a_value_is_an_error() -> None:
    doc: dict[str, Any] = {"cluster": {"engine": "local"}}
    _, errors = apply_overrides(doc, ["cluster.engine.kind=x"])
    assert [(e.file, e.key, e.bare_message) for e in errors] == [
        ("--set", "cluster.engine.kind",
         "cannot set cluster.engine.kind: cluster.engine is not a table")]
    assert doc == {"cluster": {"engine": "local"}}


def test_apply_to_a_module_that_does_not_exist() -> None:
    doc: dict[str, Any] = {"modules": {"server": {}, "client": {}}}
    _, errors = apply_overrides(doc, ["modules.zzz.replication=2", "modules.clinet.pickle=true"])
    assert [(e.key, e.bare_message, e.hint) for e in errors] == [
        ("modules.zzz.replication", "no module 'zzz' to override", "modules: server, client"),
        ("modules.clinet.pickle", "no module 'clinet' to override", "did you mean 'client'?"),
    ]


def test_mapping_keys_are_parsed_values_are_not() -> None:
    doc: dict[str, Any] = {}
    written, errors = apply_overrides(doc, {"a.b": "8", "bad key": 1})
    assert doc == {"a": {"b": "8"}}
    assert written == ["a", "a.b"]
    assert [e.key for e in errors] == ["bad key"]


@pytest.mark.parametrize("value", [
    "0", "len(query)", "true", "[1, 2]", "a#b", "x\ny \"q\" \\ \x7f é 😀", "",
    0, -3, 1.5, float("inf"), True, [3000, 4, "insertion"], (1, "2"),
    {"seed": 3, "a b": ["x"]}, {"callstyle": "async-demand(2)"},
])
def test_a_python_override_reaches_the_workers_as_itself(value: Any) -> None:
    # polybus.run(path, {key: value}) hands the workers KEY=VALUE strings: a str "0" came
    # back as the integer 0 (a priority "expected an expression string"), a dict as the
    # string '{"seed": 3}'.
    from polybus.runargs import override_strings

    (text,) = override_strings({"modules.client.kwargs.x": value})
    want = list(value) if isinstance(value, tuple) else value
    assert parse_override(text) == (["modules", "client", "kwargs", "x"], want)


def test_a_python_override_with_no_toml_form_names_its_key() -> None:
    from polybus.runargs import override_strings

    with pytest.raises(ConfigError, match=r"overrides: modules.client.args: a value of "
                                          r"type NoneType has no TOML form"):
        override_strings({"modules.client.args": None})
