"""Property tests: the parsers only ever fail with ConfigError, and valid specs round-trip."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polybus.config import compile_priority, parse_duration, parse_replication, parse_size
from polybus.config.model import Condition, MigrationPath, ReplicaSpec
from polybus.errors import ConfigError

ALPHABET = "ab.-_0123456789:#,()[]/=<>!oculadspe \t"


@given(st.text(alphabet=ALPHABET, max_size=40))
@settings(max_examples=400)
def test_replication_fails_only_with_config_error(text: str) -> None:
    try:
        replicas, paths = parse_replication(text, "m")
    except ConfigError as e:
        assert "position" in e.bare_message or "count" in e.bare_message
        return
    names = {r.name for r in replicas}
    if not replicas:  # (only a count of 0: the module is called in the client)
        assert text.strip().isdigit() and int(text) == 0 and paths == ()
        return
    assert len(names) == len(replicas) >= 1
    assert all(p.a in names and p.b in names and p.a != p.b for p in paths)
    assert all(0 < r.speed <= 1 for r in replicas)
    assert all(0 < p.fraction <= 1 for p in paths)


OPS = st.sampled_from(["<", "<=", "==", "!=", ">=", ">"])
CONDITION = st.builds(Condition, OPS, st.integers(0, 1000))  # type: ignore[arg-type]


@st.composite
def line_specs(draw: st.DrawFn) -> tuple[str, list[ReplicaSpec], list[MigrationPath]]:
    count = draw(st.integers(1, 5))
    speeds = st.sampled_from([1.0, 0.5, 0.25, 0.125])
    replicas = [ReplicaSpec(f"r{i}.host", draw(speeds), overload=draw(st.none() | CONDITION),
                            underload=draw(st.none() | CONDITION)) for i in range(count)]
    fraction = draw(st.sampled_from([Fraction(1, 2), Fraction(1, 4), Fraction(3, 4), 1]))
    parts = []
    for r in replicas:
        text = r.name
        if r.speed != 1.0:
            text += f":speed={r.speed}"
        conds = [f"{k}=(load{c.op}{c.value})" for k, c in (("oc", r.overload),
                                                            ("uc", r.underload)) if c]
        if conds:
            text += "(" + ",".join(conds) + ")"
        parts.append(text)
    text = "#".join(parts)
    paths = [MigrationPath(a.name, b.name, float(fraction))
             for a, b in pairwise(replicas)]
    if count > 1:
        text += f":[{fraction}]"
    return text, replicas, paths


@given(line_specs())
def test_generated_lines_round_trip(spec: tuple[str, list[ReplicaSpec], list[MigrationPath]]
                                    ) -> None:
    text, replicas, paths = spec
    assert parse_replication(text, "m") == (tuple(replicas), tuple(paths))


@given(st.integers(1, 64))
def test_counts(n: int) -> None:
    replicas, paths = parse_replication(n, "w")
    assert [r.name for r in replicas] == [f"w-{i}" for i in range(n)] and paths == ()


@given(st.text(max_size=30))
@settings(max_examples=300)
def test_priority_compiles_or_fails_with_config_error(text: str) -> None:
    try:
        compile_priority(text, ["x", "y"])
    except ConfigError:
        pass


@given(st.text(alphabet="0123456789.eEKMGTiBbkmsuhn µ-", max_size=12))
@settings(max_examples=300)
def test_units_fail_only_with_config_error(text: str) -> None:
    for parse in (parse_size, parse_duration):
        try:
            assert parse(text) >= 0
        except ConfigError:
            pass


@given(st.integers(0, 1 << 40))
def test_plain_sizes_are_bytes(n: int) -> None:
    assert parse_size(n) == n == parse_size(str(n))


@pytest.mark.parametrize("unit,factor", [("KiB", 1024), ("MiB", 1 << 20), ("KB", 1000)])
@given(n=st.integers(0, 10_000))
def test_sizes_scale(unit: str, factor: int, n: int) -> None:
    assert parse_size(f"{n}{unit}") == n * factor
