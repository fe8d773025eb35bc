"""A run's result digest (resultdigest.py) and the comparison of a sweep's digests
(sweepsame.py, cli/sweep_results.py), with runners that make no processes."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import numpy as np

from polybus.cli.sweep_results import results, results_said
from polybus.resultdigest import result_digest
from polybus.sweep import Measured, Sweep, run_sweep
from polybus.sweepargs import parse_varies

REP = "modules.server.replication"
ARGS = "modules.client.args"


@dataclasses.dataclass
class Point:
    x: int
    y: list[object]


def test_equal_values_have_one_digest_and_different_ones_another() -> None:
    same = [({"a": 1, "b": [1.5, None]}, {"b": [1.5, None], "a": 1}),
            ({3, 1, 2}, {2, 3, 1}),
            (np.arange(6).reshape(2, 3), np.arange(6).reshape(2, 3).copy(order="F")),
            (Point(1, [2.0]), Point(1, [2.0]))]
    for a, b in same:
        assert result_digest(a) == result_digest(b) and result_digest(a)[0] is not None
    differ = [1, 1.0, "1", b"1", [1], True, None, np.array([1]), np.array([1.0]),
              {"1": 1}, Point(1, [1.0])]
    digests = [result_digest(v)[0] for v in differ]
    assert None not in digests and len(set(digests)) == len(differ)
    assert result_digest(np.int64(7)) == result_digest(7)  # (a number, whatever its type)


def test_a_value_with_no_stable_encoding_has_no_digest_and_says_why() -> None:
    for value in (threading.Lock(), object(), {"k": [object()]}, Point(1, [threading.Lock()])):
        digest, why = result_digest(value)
        assert digest is None and why is not None and "no stable encoding" in why
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert result_digest(deep) == (None, "the result is nested too deep to encode")


def _sweep(texts: Sequence[str], repeat: int, result: dict[str, object]) -> Sweep:
    """A sweep whose run of a combination gives ``result[its value of REP]`` (a list:
    one per round), digested as the command's runner does."""
    varies, tied = parse_varies(texts)
    rounds: dict[str, int] = {}

    def runner(path: str, sets: Sequence[str]) -> Measured:
        config = dict(s.split("=", 1) for s in sets)
        value = result[config[REP]]
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            n = rounds[config[REP]] = rounds.get(config[REP], -1) + 1
            value = value[n]
        return Measured(1.0, None, None, *result_digest((value, config.get(ARGS))))
    return run_sweep("a.toml", varies, repeat, runner, tied=tied)


def test_strategies_that_agree_say_so() -> None:
    sweep = _sweep([f"{REP}=1,2"], 2, {"1": 42, "2": 42})
    assert results_said(sweep) == [
        f"results: the same in every combination (digest {sweep.cells[0].digests[0]})"]
    assert sweep.to_dict()["results_differ"] is False


def test_a_strategy_that_changes_the_result_is_warned_of_with_each_digest() -> None:
    sweep = _sweep([f"{REP}=1,2"], 1, {"1": 42, "2": 43})
    lines = results_said(sweep)
    assert lines[0].startswith("polybus sweep: warning: a strategy changed the program's "
                               "result: combinations that differ only in replication")
    assert lines[1:3] == [f"  replication={c.config[REP]}: {c.digests[0]}" for c in sweep.cells]
    assert lines[3] == ("  what made the difference: modules.server.replication=1 gives a "
                        "different result from 2")
    assert "--repeat 2 or more tells them apart" in lines[4]  # (one run each)
    assert results(sweep).changed and sweep.to_dict()["results_differ"] is True


def test_a_tied_argument_is_not_a_strategy() -> None:
    """--tie of the client's args with the replica count: every combination is given
    other args, so none is compared (it warned that replication changed the result)."""
    sweep = _sweep([f"{REP}=1,2", f"\0{ARGS}=[1],[2]"], 1, {"1": 42, "2": 42})
    assert len({c.digests[0] for c in sweep.cells}) == 2  # (the args are in the result)
    assert results_said(sweep) == ["results: not compared (a result is compared between "
                                   "combinations that differ in strategies alone, and each "
                                   "of these runs the program with other args)"]
    assert not results(sweep).changed


def test_a_combination_whose_runs_differ_is_not_compared() -> None:
    sweep = _sweep([f"{REP}=1,2,4"], 2, {"1": 1, "2": [(0.1,), (0.2,)], "4": 1})
    lines = results_said(sweep)
    assert len(lines) == 2 and lines[0].startswith("results: not deterministic")
    assert "replication=2: " in lines[0] and "replication=1" not in lines[0]
    assert lines[1].startswith("results: the same in every other combination")


def test_no_digest_is_said_and_never_a_failure() -> None:
    sweep = _sweep([f"{REP}=1,2"], 1, {"1": threading.Lock(), "2": 1})
    assert all(c.ok for c in sweep.cells)
    assert sweep.cells[0].to_dict()["digests"] == [None]
    assert "no stable encoding" in str(sweep.cells[0].to_dict()["no_digest"])
    lines = results_said(sweep)
    assert len(lines) == 1 and lines[0].startswith("results: not compared, no digest (")
    assert lines[0].endswith(": replication=1")
    row = sweep.to_csv().splitlines()[1]
    assert row.endswith(",True,-")  # (its run has none)


def test_a_runner_that_keeps_no_digest_says_nothing() -> None:
    sweep = run_sweep("a.toml", [(REP, ["1", "2"])], 2, lambda p, s: 1.0)
    assert results_said(sweep) == [] and sweep.to_dict()["results_differ"] is False


def test_a_failed_combination_is_not_said_to_agree() -> None:
    """A cell that failed gave no result: "the same in every combination" claimed it had
    agreed with the others."""
    varies, tied = parse_varies([f"{REP}=1,2,4"])

    def runner(path: str, sets: Sequence[str]) -> Measured:
        if f"{REP}=4" in sets:
            raise ValueError("bad replica")
        return Measured(1.0, None, None, *result_digest(42))
    sweep = run_sweep("a.toml", varies, 2, runner, tied=tied)
    assert [c.ok for c in sweep.cells] == [True, True, False]
    assert results_said(sweep) == [f"results: the same in every combination that succeeded "
                                   f"(digest {sweep.cells[0].digests[0]})"]


def test_a_failed_combination_is_not_said_to_agree_when_args_are_varied_too() -> None:
    """The same with an argument varied: `the same across replication at each args`
    said nothing of args=[2], whose every combination had failed."""
    varies, tied = parse_varies([f"{ARGS}=[1],[2],[3]", f"{REP}=1,2"])

    def runner(path: str, sets: Sequence[str]) -> Measured:
        if f"{ARGS}=[2]" in sets:
            raise ValueError("refused")
        return Measured(1.0, None, None, *result_digest(sets[0]))
    sweep = run_sweep("a.toml", varies, 2, runner, tied=tied)
    assert results_said(sweep) == ["results: the same across replication at each args, "
                                   "in the combinations that succeeded (digests in "
                                   "--json/--csv)"]
