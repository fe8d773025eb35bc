"""`polybus sweep --json` gives each varied value as the run's override took it (the
TOML value: 1, "sync", [10]), not the text of the command line ("1"); its help says it
reads MIL too; and an override of a module in a configuration with none says "there are
no modules" (it said "(modules: )").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from polybus.cli.main import main
from polybus.config import validate
from polybus.sweep import run_sweep
from polybus.sweepargs import parse_baseline, typed

VARIES = [("modules.server.replication", ["1", "2"]),
          ("modules.client.use.f.callstyle", ["sync", '"async"']),
          ("modules.client.args", ["[10]", '["x", 1.5]']),
          ("modules.server.replication_when", ["1979-05-27", "inf"])]


def test_the_json_s_values_are_typed() -> None:
    def runner(path: str, sets: Sequence[str]) -> float:
        return 2.0 if "modules.server.replication=1" in sets else 1.0

    sweep = run_sweep("app.toml", VARIES, 1, runner, parse_baseline("replication=1", VARIES))
    d = json.loads(sweep.to_json())
    assert d["cells"][0]["config"] == {
        "modules.server.replication": 1, "modules.client.use.f.callstyle": "sync",
        "modules.client.args": [10],
        "modules.server.replication_when": "1979-05-27"}  # (a TOML date: JSON has none)
    assert d["cells"][-1]["config"] == {
        "modules.server.replication": 2, "modules.client.use.f.callstyle": "async",
        "modules.client.args": ["x", 1.5], "modules.server.replication_when": "inf"}
    assert d["baseline"] == {"modules.server.replication": 1}
    assert d["vary"]["modules.server.replication"] == [1, 2]
    # (the table, the plot and the baseline's matching read the cells as given)
    assert sweep.cells[0].config["modules.server.replication"] == "1"
    assert [c.speedup for c in sweep.cells if c.config["modules.server.replication"] == "2"
            ] == [2.0] * 8
    assert sweep.to_csv().splitlines()[1].startswith("1,sync,[10],1979-05-27,")


def test_typed_takes_a_value_as_an_override_does() -> None:
    assert [typed(v) for v in ("8", "0.5", "true", "async-demand(5)", "a#b", "'q'")] == [
        8, 0.5, True, "async-demand(5)", "a#b", "q"]


def test_sweep_help_names_mil(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert "configuration (TOML, or MIL .cfg/.mil)" in " ".join(capsys.readouterr().out.split())


def test_an_override_of_a_module_where_there_are_none(tmp_path: Path) -> None:
    for text in ("", "[modules]\n"):
        (tmp_path / "app.toml").write_text(text)
        _, errors = validate(tmp_path / "app.toml", ("modules.server.replication=2",))
        assert [(e.file, e.key, e.bare_message, e.hint) for e in errors] == [
            ("--set", "modules.server.replication", "no module 'server' to override",
             "there are no modules"),
            (str(tmp_path / "app.toml"), "modules",  # (the file's: --set made no table)
             *(("missing table [modules]", "e.g. [modules.server] with a source") if not text
               else ("no modules", "add [modules.<name>] tables, each with a source")))]
