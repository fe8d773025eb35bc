"""`polybus sweep` as a command: every combination's configuration checked before any
run, the exit status, the table off a terminal, Ctrl-C, a --plot it cannot write,
and --tie's place."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.errors import ConfigError
from polybus.sweep import check_combinations

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
                                       for c in d["cells"]] == [1]
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
