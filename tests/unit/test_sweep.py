"""Sweep: --vary and --baseline parsed, every combination run with its overrides, a
failed run kept in its cell, a Ctrl-C keeping what ran, and --tie.

The figures and how they are shown: test_sweep_figures.py; the configuration checked
and the command: test_sweep_command.py."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from polybus.errors import UsageError
from polybus.sweep import combinations, overridden, run_sweep
from polybus.sweepargs import parse_baseline, parse_vary, split_values


def test_split_values_keeps_brackets_and_quotes() -> None:
    assert split_values("1,2,[3,4],'a,b'", "--vary k") == ["1", "2", "[3,4]", "'a,b'"]
    with pytest.raises(UsageError):
        split_values("1,,2", "--vary k")


def test_split_values_knows_an_escaped_quote() -> None:
    """A TOML basic string's ``\\"`` does not end it: ``["a\\",b"],["c"]`` was one
    value, its quote taken as closed and the next as opening one that swallowed the
    rest. A literal string (single quotes) has no escapes."""
    assert split_values(r'["a\",b"],["c"]', "--vary k") == [r'["a\",b"]', '["c"]']
    assert split_values(r'"x\"y,z",w', "--vary k") == [r'"x\"y,z"', "w"]
    assert split_values(r'"a\\",b', "--vary k") == [r'"a\\"', "b"]
    assert split_values("'a\\',b", "--vary k") == ["'a\\'", "b"]


def test_an_empty_value_names_the_vary_and_its_key() -> None:
    """It said only `empty value in ''`, leaving the user to find which --vary."""
    with pytest.raises(UsageError, match=r"^--vary modules\.worker\.replication: no value "
                       r"given$"):
        parse_vary("modules.worker.replication=")
    with pytest.raises(UsageError, match=r"^--vary modules\.worker\.replication: empty value "
                       r"in '1,,2' \(value 2 of 3\)$"):
        parse_vary("modules.worker.replication=1,,2")
    with pytest.raises(UsageError, match=r"^--baseline: empty value in 'replication=1,' "
                       r"\(value 2 of 2\)$"):
        parse_baseline("replication=1,", [parse_vary("modules.worker.replication=1,2")])


def test_parse_vary_and_every_combination_first_key_slowest() -> None:
    varies = [parse_vary("modules.server.replication=1,2"),
              parse_vary("modules.client.use.f.callstyle=sync,async-demand(3)")]
    assert combinations(varies) == [
        {"modules.server.replication": "1", "modules.client.use.f.callstyle": "sync"},
        {"modules.server.replication": "1", "modules.client.use.f.callstyle": "async-demand(3)"},
        {"modules.server.replication": "2", "modules.client.use.f.callstyle": "sync"},
        {"modules.server.replication": "2", "modules.client.use.f.callstyle": "async-demand(3)"},
    ]
    with pytest.raises(UsageError):
        parse_vary("no-equals")
    with pytest.raises(UsageError):
        combinations([("a", ["1"]), ("a", ["2"])])


def test_baseline_by_suffix_default_and_mistakes() -> None:
    varies = [("modules.server.replication", ["1", "2"]), ("modules.client.args", ["[10]"])]
    assert parse_baseline("replication=2", varies) == {"modules.server.replication": "2"}
    assert parse_baseline(None, varies) == {"modules.server.replication": "1"}
    with pytest.raises(UsageError, match="not among"):
        parse_baseline("replication=3", varies)
    with pytest.raises(UsageError, match="matches no"):
        parse_baseline("speed=1", varies)


def test_a_baseline_value_matches_the_varied_value_it_reads_as() -> None:
    # `--vary callstyle=sync,async --baseline 'callstyle="async"'` (and the other way,
    # `--vary 'timeout="1ms","10s"' --baseline timeout=1ms`) was refused, "not among the
    # varied values sync, async": the text was compared, where the override reads `async`
    # and `"async"` as the same value. The cell's own text is kept.
    bare = [("modules.client.use.f.callstyle", ["sync", "async"])]
    quoted = [("modules.server.define.f.timeout", ['"1ms"', '"10s"'])]
    assert parse_baseline('callstyle="async"', bare) == {bare[0][0]: "async"}
    assert parse_baseline("timeout=1ms", quoted) == {quoted[0][0]: '"1ms"'}
    assert parse_baseline("timeout='10s'", quoted) == {quoted[0][0]: '"10s"'}
    numbers = [("modules.server.replication", ["1", "2"])]
    with pytest.raises(UsageError, match="not among"):  # (a string is not the number)
        parse_baseline('replication="1"', numbers)
    with pytest.raises(UsageError, match="not among"):
        parse_baseline("replication=1.0", numbers)


def test_runs_each_combination_with_its_overrides_and_reports_failures() -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []
    times = {"1": 8.0, "2": 4.0, "4": 2.5}

    def runner(path: str, sets: Sequence[str]) -> float:
        seen.append((path, tuple(sets)))
        d = dict(s.split("=", 1) for s in sets)
        if d["modules.server.replication"] == "3":
            raise RuntimeError("worker died")
        return times[d["modules.server.replication"]] * (2 if d["modules.client.args"] == "[2]" else 1)

    ended: list[str] = []

    class Count:
        n = skipped = started = 0

        def start(self, description: str) -> None:
            self.started += 1

        def advance(self, description: str) -> None:
            self.n += 1
            ended.append(description)

        def skip(self, runs: int) -> None:
            self.skipped += runs

    progress = Count()
    varies = [("modules.server.replication", ["1", "2", "3", "4"]),
              ("modules.client.args", ["[1]", "[2]"])]
    sweep = run_sweep("app.toml", varies, 3, runner, parse_baseline("replication=1", varies),
                      fixed=["modules.client.use.f.callstyle=async"], progress=progress)
    # a failed run advances the bar; the runs its cell will not make leave the total
    assert progress.n == progress.started == 3 * 2 * 3 + 2 and progress.skipped == 2 * 2
    # and says so where the count drops (a run of a sweep in a log file, cmd_sweep._Bar)
    assert ended[:5] == ["replication=1, args=[1] (round 1/3) done",
                         "replication=1, args=[2] (round 1/3) done",
                         "replication=2, args=[1] (round 1/3) done",
                         "replication=2, args=[2] (round 1/3) done",
                         "replication=3, args=[1] (round 1/3) failed; its 2 later run(s) "
                         "left the total"]
    # every run got the fixed override first, then its combination
    assert seen[0] == ("app.toml", ("modules.client.use.f.callstyle=async",
                                    "modules.server.replication=1", "modules.client.args=[1]"))
    # a failing combination is tried once, reported, and the sweep goes on
    failed = [c for c in sweep.cells if not c.ok]
    assert [c.config["modules.server.replication"] for c in failed] == ["3", "3"]
    assert failed[0].error == "RuntimeError: worker died" and failed[0].speedup is None
    assert len(seen) == 3 * 3 * 2 + 2
    cell = {(c.config["modules.server.replication"], c.config["modules.client.args"]): c
            for c in sweep.cells}
    # speedup against replication=1 at the same args; efficiency per replica
    assert cell["2", "[2]"].median == 8.0 and cell["2", "[2]"].speedup == 2.0
    assert cell["4", "[1]"].speedup == pytest.approx(3.2)
    assert cell["4", "[1]"].efficiency == pytest.approx(0.8)
    assert "worker died" in sweep.to_csv()
    d = sweep.to_dict()
    assert d["baseline"] == {"modules.server.replication": 1}  # (typed: test_sweep_typed_json)
    assert d["cells"][0]["median"] == 8.0 and d["cells"][0]["elapsed_s"] == [8.0] * 3


def test_a_value_or_a_key_given_twice_is_named() -> None:
    with pytest.raises(UsageError, match=r"--vary modules.server.replication: 2 given twice"):
        parse_vary("modules.server.replication=2,1,2")
    with pytest.raises(UsageError, match=r'callstyle: "sync" \(as sync\) given twice'):
        parse_vary('modules.client.use.f.callstyle=sync,async,"sync"')  # (the run reads one)
    assert parse_vary('k=1,"1",1.0')[1] == ["1", '"1"', "1.0"]  # (three values)
    with pytest.raises(UsageError, match=r"--vary modules.server.replication: given twice"):
        combinations([("modules.server.replication", ["1"]),
                      ("modules.server.replication", ["2"])])
    with pytest.raises(UsageError, match=r"got 'replication=1,2' \('2' has no '='"):
        parse_baseline("replication=1,2", [("modules.server.replication", ["1", "2"])])
    varies = [("modules.server.replication", ["1", "2"])]
    assert overridden(["modules.server.replication=3", "modules.client.args=[1]"],
                      varies) == ["--set modules.server.replication=3: --vary gives that "
                                  "key in every run"]


def test_a_set_table_around_a_varied_key_is_warned_of_only_for_what_it_loses() -> None:
    """``--set 'use.f={cache=true}' --vary use.f.callstyle=...``: the --set goes first,
    the varied key inside its table, whose cache holds in every run; it was warned that
    --vary gave that key (the table) in every run, as if the --set did nothing."""
    varies = [("modules.client.use.f.callstyle", ["sync", "async"])]
    assert overridden(["modules.client.use.f={cache=true}"], varies) == []
    assert overridden(['modules.client.use.f={callstyle="sync", cache=true}'], varies) == [
        '--set modules.client.use.f={callstyle="sync", cache=true}: --vary '
        'modules.client.use.f.callstyle gives its callstyle in every run']
    assert overridden(["modules.client.use.f.callstyle.x=1"], varies) == [
        "--set modules.client.use.f.callstyle.x=1: --vary gives that key in every run"]


def test_an_interrupted_sweep_keeps_what_ran() -> None:
    """Ctrl-C in the fifth run (the second round's second): the first cell with its two
    runs, the others with one; the sweep says it was interrupted (its table, JSON and
    CSV were lost before)."""
    calls = []

    def runner(path: str, sets: Sequence[str]) -> float:
        calls.append(sets)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return 2.0 if "modules.server.replication=1" in sets else 1.0

    varies = [("modules.server.replication", ["1", "2", "4"])]
    sweep = run_sweep("a.toml", varies, 2, runner)
    assert isinstance(sweep.interrupted, KeyboardInterrupt) and sweep.planned == 3
    assert [(c.config["modules.server.replication"], c.elapsed_s) for c in sweep.cells] == [
        ("1", [2.0, 2.0]), ("2", [1.0]), ("4", [1.0])]
    # each combination once a round (a drifting machine moves every cell alike)
    assert [next(x for x in sets if "replication" in x)[-1] for sets in calls] == [
        "1", "2", "4", "1", "2"]
    assert sweep.cells[1].speedup == 2.0
    d = sweep.to_dict()
    assert d["complete"] is False and len(d["cells"]) == 3


def test_ctrl_c_between_two_runs_keeps_what_ran() -> None:
    """A Ctrl-C that lands after a run, while its line is printed (not inside a run),
    stops the sweep the same way: what ran is kept (it was lost, and so the JSON)."""

    class Lines:
        said = 0

        def start(self, description: str) -> None:
            pass

        def advance(self, description: str) -> None:
            self.said += 1
            if self.said == 2:
                raise KeyboardInterrupt

        def skip(self, runs: int) -> None:
            pass

    varies = [("modules.server.replication", ["1", "2", "4"])]
    sweep = run_sweep("a.toml", varies, 1, lambda path, sets: 1.0, progress=Lines())
    assert isinstance(sweep.interrupted, KeyboardInterrupt)
    assert [c.config["modules.server.replication"] for c in sweep.cells] == ["1", "2"]


def test_a_failed_cell_has_null_figures_and_a_failed_baseline_says_so() -> None:
    varies = [("modules.server.replication", ["1", "2"])]

    def runner(path: str, sets: Sequence[str]) -> float:
        if "modules.server.replication=1" in sets:
            raise RuntimeError("no")
        return 1.0

    sweep = run_sweep("a.toml", varies, 1, runner)
    failed = sweep.to_dict()["cells"][0]
    assert (failed["median"], failed["min"], failed["max"]) == (None, None, None)
    assert sweep.baseline_failed and sweep.cells[1].speedup is None



# -- --tie: a key that moves with the --vary before it ---------------------------------

def test_a_tied_key_moves_with_the_key_before_it() -> None:
    from polybus.sweep import combinations
    from polybus.sweepargs import TIED, parse_varies

    varies, tied = parse_varies(["modules.server.replication=1,2,4",
                                 TIED + "modules.client.args=[9,1],[9,2],[9,4]",
                                 "modules.client.use.f.callstyle=sync,async"])
    assert tied == {"modules.client.args"}
    combos = combinations(varies, tied)
    assert len(combos) == 6  # 3 x 2, not 3 x 3 x 2
    assert [(c["modules.server.replication"], c["modules.client.args"]) for c in combos[::2]] \
        == [("1", "[9,1]"), ("2", "[9,2]"), ("4", "[9,4]")]
    with pytest.raises(UsageError, match=r"^--tie modules.client.args: 2 value\(s\) to "
                                         r"follow --vary modules.server.replication's 3"):
        parse_varies(["modules.server.replication=1,2,4", TIED + "modules.client.args=[1],[2]"])
    with pytest.raises(UsageError, match="give it after the --vary whose values it follows"):
        parse_varies([TIED + "modules.client.args=[1]"])


def test_speedup_and_efficiency_compare_with_the_tied_values_of_the_baseline() -> None:
    # (the speedup compared with a cell of the same args, which no longer ran: "-")
    def runner(path: str, sets: Sequence[str]) -> float:
        d = dict(s.split("=", 1) for s in sets)
        return 8.0 / int(d["modules.server.replication"])

    varies = [("modules.server.replication", ["1", "2", "4"]),
              ("modules.client.args", ["[1]", "[2]", "[4]"])]
    sweep = run_sweep("app.toml", varies, 1, runner, parse_baseline("replication=1", varies),
                      tied={"modules.client.args"})
    assert [(c.config["modules.client.args"], c.speedup, c.efficiency) for c in sweep.cells] \
        == [("[1]", 1.0, 1.0), ("[2]", 2.0, 1.0), ("[4]", 4.0, 1.0)]
    assert sweep.to_dict()["tie"] == ["modules.client.args"]


def test_tied_keys_draw_one_line_take_the_baseline_s_replicas_and_are_given_once() -> None:
    # (found by a review: each tied cell was a one-point line of its own; a baseline on
    # the tied key measured efficiency against the first replica count; a --tie of a
    # varied key said "--vary K: given twice")
    from polybus.cli.sweep_plot import panels
    from polybus.sweepargs import TIED, parse_varies

    varies = [("modules.server.replication", ["1", "2", "4"]),
              ("modules.client.parts", ["1", "2", "4"])]
    tied = {"modules.client.parts"}
    sweep = run_sweep("app.toml", varies, 1,
                      lambda path, sets: 8.0 / int(dict(s.split("=", 1) for s in sets)[
                          "modules.server.replication"]),
                      parse_baseline("parts=2", varies), tied=tied)
    assert sweep.efficiency_vs == ("modules.server.replication", "2")
    assert [(c.speedup, c.efficiency) for c in sweep.cells] == [(0.5, 1.0), (1.0, 1.0),
                                                                (2.0, 1.0)]
    assert all(len(p.lines) == 1 for p in panels(sweep)), [p.lines for p in panels(sweep)]
    with pytest.raises(UsageError, match="it is varied already"):
        parse_varies(["modules.server.replication=1,2",
                      TIED + "modules.server.replication=1,2"])


def test_a_varied_key_inside_a_later_varied_table_is_refused() -> None:
    """``--vary use.f.callstyle=sync,async --vary 'use.f={callstyle="sync"},{}'``: each
    run's later override set the table whole, the first key's value with it, so that
    key's values changed nothing, yet had cells of their own and a speedup of noise.
    The table first, then the key inside it: the key is set in each table (no error)."""
    inner, outer = "modules.client.use.f.callstyle", "modules.client.use.f"
    with pytest.raises(UsageError, match=rf"^--vary {inner}: --vary {outer}, after it, "
                       rf"sets the whole table in every run, so its values would change "
                       rf"nothing; give {outer} before {inner}"):
        combinations([(inner, ["sync", "async"]), (outer, ['{callstyle="sync"}', "{}"])])
    with pytest.raises(UsageError, match=rf"^--vary {inner}: --tie {outer}, after it"):
        combinations([(inner, ["sync", "async"]), (outer, ["{}", "{a=1}"])], {outer})
    assert len(combinations([(outer, ["{}", "{cache=true}"]), (inner, ["sync", "async"])])) == 4
    assert len(combinations([(outer + "s", ["1", "2"]), (outer, ["{}", "{a=1}"])])) == 4
