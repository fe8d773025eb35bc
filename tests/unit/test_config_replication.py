"""CORD's replication notation: counts, names, speeds, migration lines and rings."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import parse_replication
from polybus.config.model import Condition, MigrationPath, ReplicaSpec
from polybus.errors import ConfigError
from polybus.testing.apps import write_one_call_app


def names(value: object, module: str = "srv") -> list[str]:
    return [r.name for r in parse_replication(value, module)[0]]


def test_count_names_replicas_after_the_module() -> None:
    replicas, paths = parse_replication(3, "server")
    assert replicas == (ReplicaSpec("server-0"), ReplicaSpec("server-1"), ReplicaSpec("server-2"))
    assert paths == ()


def test_count_as_a_digit_string() -> None:
    assert names("2") == ["srv-0", "srv-1"]


@pytest.mark.parametrize("bad", [-1, -7])
def test_count_must_not_be_negative(bad: object) -> None:
    with pytest.raises(ConfigError, match="at least 0"):
        parse_replication(bad, "srv")


@pytest.mark.parametrize("zero", [0, "0", " 0 "])
def test_a_count_of_zero_is_no_replicas(zero: object) -> None:
    """0: no replicas (the module is called in the client, ModuleSpec.in_client)."""
    assert parse_replication(zero, "srv") == ((), ())


@pytest.mark.parametrize("bad", [True, 1.5, None, ["a"]])
def test_wrong_types(bad: object) -> None:
    with pytest.raises(ConfigError, match="expected a replica count or a replication string"):
        parse_replication(bad, "srv")


def test_host_names() -> None:
    replicas, paths = parse_replication("harvey.cs.umd.edu,bugs.cs.umd.edu, thumper", "s")
    assert [r.name for r in replicas] == ["harvey.cs.umd.edu", "bugs.cs.umd.edu", "thumper"]
    assert all(r.speed == 1.0 and r.host is None for r in replicas)
    assert paths == ()


def test_speeds() -> None:
    replicas, _ = parse_replication("a:speed=0.5,b, c:speed=1, d:speed=.25", "s")
    assert [(r.name, r.speed) for r in replicas] == [("a", 0.5), ("b", 1.0), ("c", 1.0),
                                                     ("d", 0.25)]


def test_paper_example_1() -> None:
    replicas, paths = parse_replication("harvey.cs.umd.edu(oc=(load>=10))#bugs.cs.umd.edu:[1/2]",
                                        "s")
    assert replicas == (ReplicaSpec("harvey.cs.umd.edu", overload=Condition(">=", 10)),
                        ReplicaSpec("bugs.cs.umd.edu"))
    assert paths == (MigrationPath("harvey.cs.umd.edu", "bugs.cs.umd.edu", 0.5),)


def test_paper_example_2() -> None:
    replicas, paths = parse_replication("harvey(oc=(load>=10))#bugs(uc=(load==0)):[1/2]", "s")
    assert replicas == (ReplicaSpec("harvey", overload=Condition(">=", 10)),
                        ReplicaSpec("bugs", underload=Condition("==", 0)))
    assert paths == (MigrationPath("harvey", "bugs", 0.5),)


def test_both_conditions_in_one_group_and_in_two() -> None:
    one, _ = parse_replication("a(oc=(load>=10),uc=(load==0))", "s")
    two, _ = parse_replication("a(oc=(load>=10))(uc=(load==0))", "s")
    assert one == two == (ReplicaSpec("a", overload=Condition(">=", 10),
                                      underload=Condition("==", 0)),)


def test_conditions_without_inner_parentheses_and_with_spaces() -> None:
    replicas, _ = parse_replication("a ( oc = load > 3 , uc = ( load <= 1 ) )", "s")
    assert replicas[0].overload == Condition(">", 3)
    assert replicas[0].underload == Condition("<=", 1)


@pytest.mark.parametrize("op", ["<", "<=", "==", "!=", ">=", ">"])
def test_every_operator(op: str) -> None:
    replicas, _ = parse_replication(f"a(oc=(load{op}7))", "s")
    assert replicas[0].overload == Condition(op, 7)  # type: ignore[arg-type]


def test_speed_and_conditions_together() -> None:
    replicas, _ = parse_replication("a:speed=0.5(oc=(load>=4))#b", "s")
    assert replicas[0] == ReplicaSpec("a", 0.5, overload=Condition(">=", 4))


def test_default_fraction_is_half() -> None:
    _, paths = parse_replication("a#b", "s")
    assert paths == (MigrationPath("a", "b", 0.5),)


def test_line() -> None:
    replicas, paths = parse_replication("a#b#c#d", "s")
    assert [r.name for r in replicas] == ["a", "b", "c", "d"]
    assert [(p.a, p.b) for p in paths] == [("a", "b"), ("b", "c"), ("c", "d")]


def test_ring() -> None:
    replicas, paths = parse_replication("a#b#c#d#a:[1/3]", "s")
    assert [r.name for r in replicas] == ["a", "b", "c", "d"]
    assert [(p.a, p.b) for p in paths] == [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    assert all(p.fraction == pytest.approx(1 / 3) for p in paths)


@pytest.mark.parametrize(("suffix", "fraction"), [
    (":[1/2]", 0.5), (":[0.25]", 0.25), (":[1/4]", 0.25), (": [ 3 / 4 ]", 0.75), (":[1]", 1.0),
])
def test_fractions(suffix: str, fraction: float) -> None:
    _, paths = parse_replication(f"a#b{suffix}", "s")
    assert paths[0].fraction == pytest.approx(fraction)


def test_replicas_named_only_in_paths_are_replicas() -> None:
    replicas, paths = parse_replication("x, a(oc=(load>=10))#b:[0.25], c#d", "s")
    assert [r.name for r in replicas] == ["x", "a", "b", "c", "d"]
    assert paths == (MigrationPath("a", "b", 0.25), MigrationPath("c", "d", 0.5))


def test_a_replica_declared_then_linked_keeps_its_attributes() -> None:
    replicas, paths = parse_replication("a:speed=0.5, b, a#b", "s")
    assert replicas == (ReplicaSpec("a", 0.5), ReplicaSpec("b"))
    assert paths == (MigrationPath("a", "b"),)


def test_the_same_attributes_may_be_repeated() -> None:
    replicas, _ = parse_replication("a(oc=(load>=10))#b#c#a(oc=(load>=10))", "s")
    assert replicas[0].overload == Condition(">=", 10)


def position_of(text: str) -> tuple[int, str]:
    with pytest.raises(ConfigError) as info:
        parse_replication(text, "s")
    message = info.value.bare_message
    assert info.value.hint is not None and "oc=" in info.value.hint
    assert repr(text) in message
    after = message.split("at position ", 1)[1]
    number, rest = after.split(":", 1)
    return int(number), rest.strip()


@pytest.mark.parametrize(("text", "position", "expected"), [
    ("", 0, "expected a replica name, found end of text"),
    ("a,,b", 2, "expected a replica name, found ','"),
    ("a,", 2, "expected a replica name, found end of text"),
    ("a(oc=(load>=10#b", 14, "expected ')', found '#'"),
    ("a(xc=(load>=1))", 2, "expected 'oc=' or 'uc=', found 'x'"),
    ("a(oc=(lode>=1))", 6, "expected 'load', found 'l'"),
    ("a(oc=(load=>1))", 10, "expected one of < <= == != >= >, found '='"),
    ("a(oc=(load>=x))", 12, "unknown load name 'x' (one of mean, min, max, total, peer)"),
    ("a(oc=(load>=-1))", 12, "expected a whole number or a load name (mean, min, max, total, "
                             "peer), found '-'"),
    ("a#", 2, "expected a replica name, found end of text"),
    ("a b", 2, "expected ',' or '#' or end of text, found 'b'"),
    ("a#b:[1/2", 8, "expected ']', found end of text"),
    ("a#b:1/2", 4, "expected '[' of a fraction such as ':[1/2]', found '1'"),
    ("a#b:[half]", 5, "expected a fraction such as 1/2 or 0.25, found 'h'"),
    ("a:speed=fast", 8, "expected a speed such as 0.5, found 'f'"),
    ("a:speed", 7, "expected '=', found end of text"),
    # (a word after ':' was told only "expected '[' of a fraction ..., found 's'")
    ("a:sped=0.5,b", 2, "unknown replica option 'sped' (did you mean 'speed'?)"),
    ("a:Speed=0.5", 2, "unknown replica option 'Speed' (did you mean 'speed'?)"),
    ("a:speedy=0.5", 2, "unknown replica option 'speedy' (did you mean 'speed'?)"),
    ("a#b: spead", 5, "unknown replica option 'spead' (did you mean 'speed'?)"),
    ("a:weight=2", 2, "unknown replica option 'weight': a replica takes ':speed=F', a "
                      "migration path ':[fraction]'"),
    ("a#b:half", 4, "expected '[' of a fraction such as ':[1/2]', found 'h'"),
    ("(oc=(load>1))", 0, "expected a replica name, found '('"),
])
def test_syntax_errors_name_position_and_expectation(text: str, position: int,
                                                     expected: str) -> None:
    assert position_of(text) == (position, expected)


@pytest.mark.parametrize(("text", "position", "expected"), [
    ("a:speed=0", 8, "speed 0.0 is out of range (0 < speed <= 1)"),
    ("a:speed=1.5", 8, "speed 1.5 is out of range (0 < speed <= 1)"),
    ("a#b:[0]", 5, "fraction 0.0 is out of range (0 < fraction <= 1)"),
    ("a#b:[3/2]", 5, "fraction 1.5 is out of range (0 < fraction <= 1)"),
    ("a#b:[1/0]", 5, "a fraction with denominator 0"),
    ("a:[1/2]", 2, "a fraction is given but there is no migration path (join replicas with '#')"),
    ("a#a", 2, "a migration path from 'a' to itself"),
    ("a,b,a", 4, "duplicate replica 'a'"),
    ("a#b, b#a", 5, "duplicate migration path b#a"),
    ("a(oc=(load>1),oc=(load>2))", 14, "oc given twice for replica 'a'"),
    ("a:speed=0.5:speed=0.5", 17, "speed given twice for replica 'a'"),
    ("a:speed=0.5#a:speed=0.25", 20, "conflicting speeds for replica 'a'"),
    ("a(uc=(load==0))#b#a(uc=(load<1))", 20, "conflicting uc conditions for replica 'a'"),
])
def test_semantic_errors_name_position(text: str, position: int, expected: str) -> None:
    assert position_of(text) == (position, expected)


def test_absurd_counts_are_refused() -> None:
    with pytest.raises(ConfigError, match="the replica count 100000 is more than 65536"):
        parse_replication(100_000, "srv")
    assert len(parse_replication(65536, "srv")[0]) == 65536


# -- a lone word that is not a replica list ------------------------------------------------

@pytest.mark.parametrize(("bad", "count"), [
    ("two", "replication = 2"), ("Four", "replication = 4"), (" ten ", "replication = 10"),
    ("twenty-one", "replication = 21"), ("twentyone", "replication = 21"),
    ("one_hundred", "replication = 100"), ("zero", "replication = 0")])
def test_a_number_word_is_not_a_replica_name(bad: str, count: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_replication(bad, "srv")
    assert f"{bad.strip()!r} reads as a number word" in e.value.bare_message
    assert count in e.value.bare_message
    assert e.value.hint is not None and "a count N >= 0" in e.value.hint


@pytest.mark.parametrize("bad", ["2.0", "1e3", "4x", "3O", "2replicas"])
def test_a_lone_word_that_starts_like_a_count_is_a_typo(bad: str) -> None:
    with pytest.raises(ConfigError, match="is not a whole number of replicas"):
        parse_replication(bad, "srv")


@pytest.mark.parametrize("good", ["harvey", "thumper.cs.umd.edu", "10.0.0.7", "node1",
                                  "server-3", "tw", "four:speed=1", "two,three", "one#two"])
def test_a_lone_name_or_an_explicit_list_is_still_accepted(good: str) -> None:
    assert names(good)


def test_the_error_names_file_key_and_the_accepted_forms(tmp_path: Path) -> None:
    from polybus.config import validate

    app = write_one_call_app(tmp_path, server_keys='replication = "two"')
    _, found = validate(app)
    assert [(e.file, e.key) for e in found] == [(str(app), "modules.server.replication")]
    assert "replication = 2" in str(found[0]) and "a count N >= 0" in str(found[0])
    _, found = validate(app, ("modules.server.replication=three",))
    assert [(e.file, e.key) for e in found] == [("--set", "modules.server.replication")]


@pytest.mark.parametrize(("written", "named"), [
    ("replication = 1", False), ('replication = "2"', False), ("", False),
    ('replication = "server-0"', True),  # (the name a count makes: still a name)
    ('replication = "server-0,server-1"', True), ('replication = "a:speed=0.5"', True)])
def test_a_replication_of_names_is_told_from_a_count(tmp_path: Path, written: str,
                                                     named: bool) -> None:
    from polybus.config import load

    app = load(write_one_call_app(tmp_path, server_keys=written))
    assert app.modules["server"].named is named
