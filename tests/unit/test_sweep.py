"""Sweep: combinations, overrides handed to each run, baseline, failures kept in their cell."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from polybus.errors import ConfigError, UsageError
from polybus.sweep import (
    Sweep,
    check_combinations,
    combinations,
    overridden,
    run_sweep,
)
from polybus.sweepargs import parse_baseline, parse_vary, split_values


def test_split_values_keeps_brackets_and_quotes() -> None:
    assert split_values("1,2,[3,4],'a,b'", "--vary k") == ["1", "2", "[3,4]", "'a,b'"]
    with pytest.raises(UsageError):
        split_values("1,,2", "--vary k")


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
    assert d["baseline"] == {"modules.server.replication": "1"}
    assert d["cells"][0]["median"] == 8.0 and d["cells"][0]["elapsed_s"] == [8.0] * 3


def test_no_efficiency_when_the_baseline_is_not_a_replica_count() -> None:
    varies = [("modules.client.use.f.callstyle", ["sync", "async"])]
    sweep = run_sweep("a.toml", varies, 1,
                      lambda p, s: 2.0 if s[-1].endswith("=sync") else 1.0)
    assert [c.speedup for c in sweep.cells] == [1.0, 2.0]
    assert [c.efficiency for c in sweep.cells] == [None, None]


def _callstyle_first(repeat: int = 1) -> Sweep:
    # the first --vary is not a number and is the default baseline; replication comes second
    varies = [("modules.client.use.f.callstyle", ["sync", "async"]),
              ("modules.server.replication", ["1", "2"])]
    times = {("sync", "1"): 8.0, ("sync", "2"): 5.0, ("async", "1"): 4.0, ("async", "2"): 2.5}

    def runner(path: str, sets: Sequence[str]) -> float:
        d = dict(s.rsplit(".", 1)[-1].split("=", 1) for s in sets)
        return times[d["callstyle"], d["replication"]]

    return run_sweep("a.toml", varies, repeat, runner)


def test_efficiency_is_along_a_varied_replication_count_whatever_the_baseline() -> None:
    # The baseline is callstyle=sync, not a replica count: efficiency was None in every
    # cell, and the plot's efficiency panel was empty.
    sweep = _callstyle_first()
    assert sweep.baseline == {"modules.client.use.f.callstyle": "sync"}
    assert sweep.efficiency_vs == ("modules.server.replication", "1")
    got = {tuple(c.config.values()): (c.speedup, c.efficiency) for c in sweep.cells}
    assert got["async", "1"] == (2.0, 1.0)  # speedup vs sync; efficiency vs replication=1
    assert got["sync", "2"] == (1.0, pytest.approx(0.8))  # 8 / 5 / 2
    assert got["async", "2"] == (2.0, pytest.approx(0.8))  # 4 / 2.5 / 2


def test_plot_with_a_first_vary_that_is_not_a_number_warns_nothing(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    from polybus.cli.sweep_plot import plot

    png = tmp_path / "s.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "No artists with labels found to put in legend"
        plot(_callstyle_first(), str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_panels_efficiency_against_replicas_or_none() -> None:
    from polybus.cli.sweep_plot import panels

    time, speedup, efficiency = panels(_callstyle_first())
    assert (time.name, time.xlabel) == ("elapsed s", "replication")
    assert speedup.lines == {"callstyle=sync": [(1.0, 1.0), (2.0, 1.0)],
                             "callstyle=async": [(1.0, 2.0), (2.0, 2.0)]}
    assert (efficiency.name, efficiency.xlabel) == ("efficiency", "replication (replicas)")
    assert efficiency.lines == {"callstyle=sync": [(1.0, 1.0), (2.0, pytest.approx(0.8))],
                                "callstyle=async": [(1.0, 1.0), (2.0, pytest.approx(0.8))]}
    # no replica count varied: no efficiency to draw, so no efficiency panel
    only = run_sweep("a.toml", [("modules.client.use.f.callstyle", ["sync", "async"])], 1,
                     lambda p, s: 1.0)
    assert [(p.name, p.ticks) for p in panels(only)] == [
        ("elapsed s", ["sync", "async"]), ("speedup", ["sync", "async"])]


def test_a_failed_cell_shows_the_first_line_of_its_error() -> None:
    from polybus.cli.sweep_table import brief
    assert brief(None) == "no runs"
    assert brief("ValueError: neg") == "ValueError: neg"
    assert brief("ValueError: neg\n  File 'x.py', line 3\n", ["--json", "--csv"]) == (
        "ValueError: neg (full text in --json/--csv)")
    long = "RemoteException: " + "x" * 300  # one long line: cut, the rest in the files
    cut = brief(long, ["--json", "--csv"])
    assert cut.startswith("RemoteException: xxx") and cut.endswith(
        "... (full text in --json/--csv)") and len(cut) < 110


def test_the_bytes_of_each_run_are_kept_and_shown_as_the_lower_median() -> None:
    from polybus.cli.sweep_table import size, table
    from polybus.sweep import Measured

    sent = {"1": iter([900, 700, 800]), "2": iter([300, 100, 200])}

    def runner(path: str, sets: Sequence[str]) -> Measured:
        rep = sets[-1].rsplit("=", 1)[1]
        return Measured(1.0 / int(rep), next(sent[rep]), 10)

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 3, runner)
    one, two = sweep.cells
    assert one.bytes_sent == [900, 700, 800] and one.sent == 800 and one.received == 10
    assert two.to_dict()["bytes_sent_median"] == 200
    assert two.to_dict()["bytes_received"] == [10, 10, 10]
    rows = sweep.to_csv().splitlines()
    assert rows[0].split(",")[-3:] == ["bytes_sent", "bytes_received", "error"]
    assert rows[2].split(",")[-3:] == ["200", "10", ""]
    headers = [c.header for c in table(sweep).columns]
    assert headers[-2:] == ["sent", "received"]
    from polybus.cli.sweep_plot import panels
    drawn = {p.name: p for p in panels(sweep)}
    assert drawn["bytes sent"].lines == {"": [(1.0, 800.0), (2.0, 200.0)]}
    assert "bytes received" not in drawn  # (10 in every run: one flat line says nothing)
    assert [size(n) for n in (None, 999, 6_712_345, 2_500_000_000)] == [
        "\u2013", "999 B", "6.71 MB", "2.5 GB"]


def test_a_runner_that_gives_only_times_leaves_the_bytes_out() -> None:
    from polybus.cli.sweep_table import table

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 1, lambda p, s: 1.0)
    assert all(c.sent is None and c.to_dict()["bytes_sent"] == [] for c in sweep.cells)
    assert sweep.to_csv().splitlines()[1].endswith(",,,")  # (no bytes, no error)
    assert "sent" not in [c.header for c in table(sweep).columns]
    from polybus.cli.sweep_plot import panels
    assert "bytes sent" not in [p.name for p in panels(sweep)]


APP = {
    "server.py": "def square(x):\n    return x * x\n",
    "client.py": 'from polybus import use\n\nsquare = use("square")\n\n\ndef main(n):\n'
                 "    return square(n)\n",
    "app.toml": '[modules.server]\nsource = "server.py"\n\n[modules.client]\n'
                'source = "client.py"\nentrypoint = "main"\nargs = [3]\n\n'
                '[bind]\n"client.square" = "server.square"\n',
}


@pytest.fixture
def app(tmp_path: Path) -> str:
    for name, text in APP.items():
        (tmp_path / name).write_text(text)
    return str(tmp_path / "app.toml")


def test_every_combination_is_checked_and_a_bad_value_is_blamed_on_vary(app: str) -> None:
    varies = [("modules.server.replication", ["1", "2"]),
              ("modules.client.use.square.callstyle", ["sync", "nonsense"])]
    with pytest.raises(ConfigError) as info:
        check_combinations(app, varies)
    # once, though two combinations have it
    assert [(e.file, e.key, e.bare_message) for e in info.value.errors] == [  # type: ignore[attr-defined]
        ("--vary", "modules.client.use.square.callstyle", "unknown call style 'nonsense'")]
    check_combinations(app, [("modules.server.replication", ["1", "2"])])  # all valid: quiet


def test_a_mistake_in_a_fixed_override_stays_blamed_on_set(app: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_combinations(app, [("modules.server.replication", ["1"])],
                           ["modules.client.use.sqare.callstyle=sync"])
    assert (info.value.file, info.value.key) == ("--set", "modules.client.use.sqare")


def _cli(app: str, monkeypatch: pytest.MonkeyPatch, fail: str | None, *vary: str
         ) -> tuple[int, list[list[str]]]:
    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    runs: list[list[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(list(sets))
        if fail is not None and fail in sets:
            raise RuntimeError("it broke")
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    args = ["sweep", app, "--repeat", "1"]
    for v in vary:
        args += ["--vary", v]
    return main(args), runs


def test_cli_an_invalid_combination_runs_nothing_and_exits_2(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rc, runs = _cli(app, monkeypatch, None, "modules.server.replication=1,2",
                    "modules.client.use.square.callstyle=sync,nonsense")
    assert (rc, runs) == (2, [])
    assert "--vary: modules.client.use.square.callstyle: unknown call style 'nonsense'" in (
        capsys.readouterr().err)


@pytest.mark.parametrize(("fail", "status"), [
    (None, 0), ("modules.server.replication=2", 1), ("modules.server.replication=1", 1)])
def test_cli_exit_status_is_1_when_any_combination_failed_at_run_time(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        fail: str | None, status: int) -> None:
    rc, runs = _cli(app, monkeypatch, fail, "modules.server.replication=1,2")
    assert rc == status and len(runs) == 2  # every combination still ran
    out = capsys.readouterr().out
    assert "speedup" in out and ("failed" in out) == (fail is not None)


def test_cli_a_wide_sweep_table_is_whole_when_stdout_is_not_a_terminal(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # cut to 80 columns ("\u2026") when piped or redirected, as rich does off a terminal
    words = [f"a-rather-long-argument-number-{i}-of-the-client" for i in range(4)]
    args = [f'[["{words[0]}", "{words[1]}"]]', f'[["{words[2]}", "{words[3]}"]]']
    rc, runs = _cli(app, monkeypatch, None, "modules.server.replication=1,2",
                    f"modules.client.args={args[0]},{args[1]}")
    assert rc == 0 and len(runs) == 4
    out = capsys.readouterr().out
    assert "\u2026" not in out
    for text in [*args, "speedup", "efficiency", "speedup vs modules.server.replication=1"]:
        assert text in out, text


def test_a_value_or_a_key_given_twice_is_named() -> None:
    with pytest.raises(UsageError, match=r"--vary modules.server.replication: 2 given twice"):
        parse_vary("modules.server.replication=2,1,2")
    with pytest.raises(UsageError, match=r"--vary modules.server.replication: given twice"):
        combinations([("modules.server.replication", ["1"]),
                      ("modules.server.replication", ["2"])])
    with pytest.raises(UsageError, match=r"got 'replication=1,2' \('2' has no '='"):
        parse_baseline("replication=1,2", [("modules.server.replication", ["1", "2"])])
    varies = [("modules.server.replication", ["1", "2"])]
    assert overridden(["modules.server.replication=3", "modules.client.args=[1]"],
                      varies) == ["modules.server.replication=3"]


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


def test_cli_ctrl_c_shows_and_saves_what_ran_then_exits_130(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    import json

    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    runs: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(sets)
        if len(runs) == 2:
            raise KeyboardInterrupt
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    out = tmp_path / "s.json"
    rc = main(["sweep", app, "--repeat", "1", "--vary", "modules.server.replication=1,2,4",
               "--json", str(out), "--csv", str(tmp_path / "s.csv")])
    assert rc == 130
    d = json.loads(out.read_text())
    assert d["complete"] is False and [c["config"]["modules.server.replication"]
                                       for c in d["cells"]] == ["1"]
    assert (tmp_path / "s.csv").read_text().count("\n") == 2  # header and the one cell
    assert "interrupted: 1 of 3 combinations ran" in capsys.readouterr().out


@pytest.mark.parametrize(("plot", "said"), [
    ("x.txt", "--plot {d}/x.txt: not a format it can write"),
    ("nodir/x.png", "--plot {d}/nodir/x.png: directory {d}/nodir does not exist")])
def test_cli_a_plot_it_could_not_write_fails_before_any_run(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path, plot: str, said: str) -> None:
    pytest.importorskip("matplotlib")
    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    runs: list[Sequence[str]] = []
    monkeypatch.setattr(cmd_sweep, "_runner", lambda p, s: runs.append(s) or 1.0)
    rc = main(["sweep", app, "--repeat", "1", "--vary", "modules.server.replication=1,2",
               "--plot", str(tmp_path / plot)])
    assert (rc, runs) == (2, [])
    assert said.format(d=tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "nodir").exists()


def test_keys_with_the_same_last_part_are_told_apart_in_the_table_and_plot() -> None:
    from polybus.cli.sweep_plot import panels
    from polybus.cli.sweep_table import short_names, table

    a, b = "modules.client.use.s2.forward", "modules.client.use.s3.forward"
    assert short_names([a, b, "modules.server.replication"]) == {
        a: "s2.forward", b: "s3.forward", "modules.server.replication": "replication"}
    assert short_names(["x.a.b", "y.a.b"]) == {"x.a.b": "x.a.b", "y.a.b": "y.a.b"}
    sweep = run_sweep("a.toml", [(a, ["true", "false"]), (b, ["true", "false"])], 1,
                      lambda p, s: 1.0)
    assert [c.header for c in table(sweep).columns][:2] == ["s2.forward", "s3.forward"]
    time = panels(sweep)[0]
    assert time.xlabel == "s2.forward" and set(time.lines) == {
        "s3.forward=true", "s3.forward=false"}


def test_a_bytes_axis_starts_at_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A new user's sweep over replicas sent 1.72 kB to 1.76 kB (call ids a digit longer):
    # an axis fitted to the points drew a steep rise out of a 2% change.
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.cli.sweep_plot import plot
    from polybus.sweep import Measured

    sent = {"1": 1720, "2": 1740, "4": 1760}
    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2", "4"])], 1,
                      lambda p, s: Measured(1.0, sent[s[-1].rsplit("=", 1)[1]], 10))
    figures: list[Any] = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (figures.append(fig), close(fig)))
    drawn = plot(sweep, str(tmp_path / "s.png"))
    (fig,) = figures
    limits = {p.name: ax.get_ylim() for p, ax in zip(drawn, fig.axes, strict=True)}
    assert limits["bytes sent"][0] == 0 and limits["bytes sent"][1] >= 1760
    assert limits["elapsed s"][0] != 0  # (times keep the fitted axis)


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


def test_cli_tie_keeps_its_place_after_its_vary(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    runs: list[list[str]] = []
    monkeypatch.setattr(cmd_sweep, "_runner", lambda path, sets: runs.append(list(sets)) or 1.0)
    rc = main(["sweep", app, "--repeat", "1", "--vary", "modules.server.replication=1,2",
               "--tie", "modules.client.args=[1],[2]"])
    assert rc == 0
    assert runs == [["modules.server.replication=1", "modules.client.args=[1]"],
                    ["modules.server.replication=2", "modules.client.args=[2]"]]


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
