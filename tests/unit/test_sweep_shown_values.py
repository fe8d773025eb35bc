"""A varied string value is shown as the value, not as the TOML text typed for it: a
replication varied as `'modules.server.replication="a:speed=0.5,b","c"'` showed
`"a:speed=0.5,b"` with its quotes in the table, the CSV, the plot's labels and the
progress, where `callstyle=sync` (typed bare) showed `sync`. Quotes are kept only for
a key whose values would otherwise read alike (`2` and `"2"`). And Ctrl-C said only
`polybus sweep: interrupted`: it now says how far the sweep went and where what ran
was saved."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from polybus.cli.sweep_table import table, title
from polybus.sweep import Sweep, run_sweep
from polybus.sweepargs import shown_values

REPL = "modules.server.replication"
STYLE = "modules.client.use.f.callstyle"


def _sweep() -> Sweep:
    return run_sweep("a.toml", [(REPL, ['"a:speed=0.5,b"', '"c"', "2"]),
                                (STYLE, ["sync", '"async"'])], 1, lambda p, s: 1.0)


def test_a_string_value_is_shown_without_its_quotes_in_the_table_and_csv() -> None:
    sweep = _sweep()
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table(sweep))
    text = console.export_text()
    assert "a:speed=0.5,b" in text and '"' not in text
    rows = list(csv.DictReader(io.StringIO(sweep.to_csv())))
    assert [r[REPL] for r in rows] == ["a:speed=0.5,b"] * 2 + ["c"] * 2 + ["2"] * 2
    assert [r[STYLE] for r in rows] == ["sync", "async"] * 3
    assert '"' not in title(sweep)  # (efficiency vs replication=a:speed=0.5,b)
    # the JSON keeps the value as the run took it
    assert sweep.to_dict()["cells"][0]["config"][REPL] == "a:speed=0.5,b"


def test_quotes_are_kept_where_two_values_would_read_alike() -> None:
    assert shown_values(["2", '"2"']) == {"2": "2", '"2"': '"2"'}
    assert shown_values(['"x"', "[1]"]) == {'"x"': "x", "[1]": "[1]"}


def test_the_progress_names_a_string_value_without_its_quotes() -> None:
    said: list[str] = []

    class Progress:
        def start(self, description: str) -> None:
            said.append(description)

        def advance(self, description: str) -> None:
            pass

        def skip(self, runs: int) -> None:
            pass

    run_sweep("a.toml", [(REPL, ['"a,b"', "2"])], 1, lambda p, s: 1.0, progress=Progress())
    assert said[0] == "replication=a,b (round 1/1)"


def test_ctrl_c_says_how_far_the_sweep_went_and_where_it_was_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    for name, text in {"server.py": "def f(x):\n    return x\n",
                       "client.py": 'from polybus import use\n\nf = use("f")\n\n\n'
                                    "def main():\n    return f(1)\n",
                       "app.toml": '[modules.server]\nsource = "server.py"\n\n'
                                   '[modules.client]\nsource = "client.py"\n'
                                   'entrypoint = "main"\n\n'
                                   '[bind]\n"client.f" = "server.f"\n'}.items():
        (tmp_path / name).write_text(text)
    runs: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(sets)
        if len(runs) == 3:
            raise KeyboardInterrupt
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    out = tmp_path / "s.json"
    rc = main(["sweep", str(tmp_path / "app.toml"), "--repeat", "2", "--quiet",
               "--vary", f"{REPL}=1,2", "--json", str(out)])
    assert rc == 130 and out.exists()
    err = capsys.readouterr().err
    assert (f"polybus sweep: interrupted (after 2 of 4 runs; what ran is in the table "
            f"above and in --json {out})") in err
