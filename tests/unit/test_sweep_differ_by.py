"""When strategies change a sweep's result, the warning says which varied key made the
difference (sweepsame.splits, cli/sweep_results.py), and --json keeps it
(``results_differ_by``); when no single key does, it says so and names each combination."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from polybus.cli.sweep_results import results, results_said
from polybus.resultdigest import result_digest
from polybus.sweep import Measured, Sweep, run_sweep
from polybus.sweepargs import parse_varies

TRANSPORT = "modules.server.transport"
STYLE = "modules.client.use.f.callstyle"
REP = "modules.server.replication"
ARGS = "modules.client.args"
WARNING = "polybus sweep: warning: a strategy changed the program's result"

Result = Callable[[Mapping[str, str]], object]


def _sweep(texts: Sequence[str], result: Result, repeat: int = 2) -> Sweep:
    """A sweep whose every run of a combination gives ``result(its values)``."""
    varies, tied = parse_varies(texts)

    def runner(path: str, sets: Sequence[str]) -> Measured:
        return Measured(1.0, None, None, *result(dict(s.split("=", 1) for s in sets)))
    return run_sweep("a.toml", varies, repeat, runner, tied=tied)


def _digested(result: Result) -> Result:
    return lambda config: result_digest(result(config))


def _differ_by(sweep: Sweep) -> object:
    return sweep.to_dict()["results_differ_by"]


def test_the_one_key_whose_value_changes_the_result_is_named() -> None:
    """Every cell with transport=shm gives one result, every other another, whatever the
    call style: the warning says transport=shm differs from tcp/ipc."""
    sweep = _sweep([f"{TRANSPORT}=tcp,shm,ipc", f"{STYLE}=sync,async"],
                   _digested(lambda c: c[TRANSPORT] == "shm"))
    lines = results_said(sweep)
    assert lines[0].startswith(WARNING) and results(sweep).changed
    assert len([x for x in lines if x.startswith("  transport=")]) == 6  # (each named)
    assert "  what made the difference: modules.server.transport=shm gives a different " \
           "result from tcp/ipc, whatever the other varied keys" in lines
    assert sweep.to_dict()["results_differ"] is True
    assert _differ_by(sweep) == [{"at": {}, "keys": {TRANSPORT: [["tcp", "ipc"], ["shm"]]}}]


def test_a_key_whose_every_value_gives_another_result_is_named_with_each() -> None:
    sweep = _sweep([f"{REP}=1,2,4", f"{STYLE}=sync,async"], _digested(lambda c: c[REP]))
    assert "  what made the difference: modules.server.replication: 1, 2 and 4 each give " \
           "a different result, whatever the other varied keys" in results_said(sweep)
    assert _differ_by(sweep) == [{"at": {}, "keys": {REP: [[1], [2], [4]]}}]


def test_a_result_that_depends_on_two_keys_at_once_is_said_to_follow_no_single_one() -> None:
    sweep = _sweep([f"{TRANSPORT}=tcp,shm", f"{STYLE}=sync,async"],
                   _digested(lambda c: (c[TRANSPORT] == "shm") != (c[STYLE] == "async")))
    lines = results_said(sweep)
    assert lines[0].startswith(WARNING)
    for c in sweep.cells:  # (every combination with its digest, as ever)
        assert (f"  transport={c.config[TRANSPORT]}, callstyle={c.config[STYLE]}: "
                f"{c.digests[0]}") in lines
    said = [x for x in lines if x.startswith("  what made the difference")]
    assert said == ["  what made the difference: no single varied key (no one key's values "
                    "separate the different results: they depend on two or more together)"]
    assert _differ_by(sweep) == [{"at": {}, "keys": {}}]


def test_each_argument_says_its_own_key_when_they_are_not_the_same() -> None:
    """At args [1] the transport changes the result, at [2] the call style: a line for
    each, named by its args."""
    def result(c: Mapping[str, str]) -> object:
        return c[TRANSPORT] if c[ARGS] == "[1]" else c[STYLE]

    sweep = _sweep([f"{TRANSPORT}=tcp,shm", f"{STYLE}=sync,async", f"{ARGS}=[1],[2]"],
                   _digested(result))
    said = [x for x in results_said(sweep) if x.startswith("  what made the difference")]
    assert said == [
        "  what made the difference at args=[1]: modules.server.transport=tcp gives a "
        "different result from shm, whatever the other varied keys",
        "  what made the difference at args=[2]: modules.client.use.f.callstyle=sync gives "
        "a different result from async, whatever the other varied keys"]
    assert _differ_by(sweep) == [
        {"at": {ARGS: [1]}, "keys": {TRANSPORT: [["tcp"], ["shm"]]}},
        {"at": {ARGS: [2]}, "keys": {STYLE: [["sync"], ["async"]]}}]


def test_keys_that_move_together_are_each_named() -> None:
    sweep = _sweep([f"{REP}=1,2", f"\0{STYLE}=sync,async"], _digested(lambda c: c[REP]))
    said = [x for x in results_said(sweep) if x.startswith("  what made the difference")]
    assert said == ["  what made the difference: modules.server.replication=1 gives a "
                    "different result from 2; modules.client.use.f.callstyle=sync gives a "
                    "different result from async (each alone separates the results)"]


def test_results_that_agree_have_nothing_to_explain() -> None:
    sweep = _sweep([f"{TRANSPORT}=tcp,shm"], _digested(lambda c: 1))
    assert not any("what made the difference" in x for x in results_said(sweep))
    assert _differ_by(sweep) == [] and sweep.to_dict()["results_differ"] is False


def test_what_made_the_difference_shows_a_string_value_without_its_quotes() -> None:
    sweep = _sweep([f'{REP}=1,2,"a,b"'], _digested(lambda c: c[REP] == "1"))
    said = results_said(sweep, results(sweep))
    assert any("replication=1 gives a different result from 2/a,b" in line
               for line in said), said
