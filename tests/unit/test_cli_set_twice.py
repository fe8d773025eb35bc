"""A key given twice to --set is warned of once, naming the one taken (the last, as
before: which one wins is unchanged); a --vary of one value is said to vary nothing.
Both were silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import main
from polybus.config.overrides import repeated
from polybus.sweepargs import parse_varies, varies_nothing
from polybus.testing.apps import write_one_call_app


def test_check_warns_of_a_key_set_twice_and_takes_the_last(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    assert main(["check", "--no-import", str(app), "--set", "modules.server.replication=2",
                 "--set", "modules.server.replication=3"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "given twice" in line]
    assert lines == ["polybus check: warning: --set modules.server.replication given twice: "
                     "the last, modules.server.replication=3, is taken"], err


def test_check_output_shows_the_last_taken(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path)
    main(["check", "--no-import", str(app), "--set", "modules.server.replication=2",
          "--set", "modules.server.replication=3"])
    assert "servers server x3" in capsys.readouterr().out


@pytest.mark.parametrize(("sets", "said"), [
    (["a.b=1", "a.b=2"], ["--set a.b given twice: the last, a.b=2, is taken"]),
    (["a.b=1", "c=1", "a.b=2", "a . b = 3"],
     ["--set a.b given 3 times: the last, a . b = 3, is taken"]),
    # the same key however it is written; bind.client.f is bind."client.f"
    (['bind.client.f="server.f"', 'bind."client.f"="server.g"'],
     ['--set bind."client.f" given twice: the last, bind."client.f"="server.g", is taken']),
    # a key set inside a table a later --set sets whole: dropped by it
    (["m.define.f.pool=2", "m.define={g = {}}"],
     ["--set m.define.f.pool=2: a later --set m.define={g = {}} sets m.define whole, "
      "so this one is dropped"]),
    # nothing lost: the same value twice, a table first and a key in it after, other keys
    (["a.b=1", "a.b=1"], []),
    (["m.define={g = {}}", "m.define.f.pool=2"], []),
    (["a.b=1", "a.c=2"], []),
    (["a.b=1", "a.b", "=2", "a..b=3"], []),  # (bad ones: the check's)
])
def test_repeated_names_what_is_lost(sets: list[str], said: list[str]) -> None:
    assert repeated(sets) == said


def test_an_engine_worker_does_not_say_it_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (a run's workers get its --set as given: the run has said it)
    app = write_one_call_app(tmp_path)
    main(["worker", "--config", str(app), "--as", "nosuch", "--registry", "127.0.0.1:1",
          "--exit-with-parent", "--set", "modules.server.replication=2",
          "--set", "modules.server.replication=3"])
    assert "given twice" not in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "said"), [
    (["--vary", "modules.server.replication=2"],
     ["--vary modules.server.replication=2: one value, so it varies nothing (every run "
      "sets it so, as --set would); give two or more"]),
    (["--vary", "modules.server.replication=1,2"], []),
    (["--vary", "modules.server.replication=2", "--tie", "modules.client.args=[3]"],
     ["--vary modules.server.replication=2: one value, so it varies nothing (every run "
      "sets it so, as --set would); give two or more"]),
])
def test_a_vary_of_one_value_is_said_to_vary_nothing(argv: list[str],
                                                     said: list[str]) -> None:
    texts = [("\0" if a == "--tie" else "") + v for a, v in zip(argv[::2], argv[1::2],
                                                                strict=True)]
    varies, tied = parse_varies(texts)
    assert varies_nothing(varies, tied) == said


def test_sweep_says_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch) -> None:
    # (before any run: --csv into a directory that is not there stops it there)
    app = write_one_call_app(tmp_path)
    assert main(["sweep", str(app), "--vary", "modules.server.replication=2",
                 "--csv", str(tmp_path / "none" / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert "polybus sweep: warning: --vary modules.server.replication=2: one value" in err
