"""`polybus sweep` says each distinct warning of its runs once, the first time, and at
the end how many later runs said it again (12 combinations run 3 times said the same
warning 36 times): polybus's log lines and the configuration's notes alike. A warning
that names what changes from run to run (the replicas a run took in turn) is one kind
by its ``KIND``. Once the sweep is over, warnings are said as ever."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from polybus.errors import ConfigWarning
from polybus.saidonce import KIND

APP = {
    "server.py": "def square(x):\n    return x * x\n",
    "client.py": 'from polybus import use\n\nsquare = use("square")\n\n\ndef main(n):\n'
                 "    return square(n)\n",
    "app.toml": '[modules.server]\nsource = "server.py"\n\n[modules.client]\n'
                'source = "client.py"\nentrypoint = "main"\nargs = [3]\n\n'
                '[bind]\n"client.square" = "server.square"\n',
}
COUNT = ("polybus: warning: module 'server': 3 replicas registered, replication = 1; "
         "using server-0, not server-1, server-2 (raise replication to use them all)")
log = logging.getLogger("polybus.client")


@pytest.fixture
def app(tmp_path: Path) -> str:
    for name, text in APP.items():
        (tmp_path / name).write_text(text)
    return str(tmp_path / "app.toml")


def _sweep(app: str, monkeypatch: pytest.MonkeyPatch,
           say: Callable[[int, Sequence[str]], None]) -> int:
    """A sweep of 3 combinations x 2 runs whose every run calls ``say(run, sets)``."""
    from polybus.cli import cmd_sweep
    from polybus.cli.main import main

    runs: list[int] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        runs.append(len(runs) + 1)
        say(runs[-1], sets)
        return 1.0

    monkeypatch.setattr(cmd_sweep, "_runner", runner)
    rc = main(["sweep", app, "--vary", "modules.server.replication=1,2,3", "--repeat", "2",
               "--quiet"])
    assert len(runs) == 6
    return rc


def _said(caplog: pytest.LogCaptureFixture, start: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(start)]


def test_a_warning_every_run_says_is_said_once_and_its_repeats_counted(
        app: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _sweep(app, monkeypatch, lambda run, sets: log.warning(COUNT)) == 0
    assert _said(caplog, "polybus: warning: module 'server'") == [COUNT]
    err = capsys.readouterr().err
    assert ("polybus sweep: 5 more runs said this warning again (said once, above): "
            "polybus: warning: module 'server': 3 replicas registered, replication = 1; "
            "using server-0, not se...\n") in err, err  # (its first 100 characters)


def test_distinct_warnings_are_each_said_once(
        app: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    def say(run: int, sets: Sequence[str]) -> None:
        log.warning("polybus: warning: %s is short", sets[-1])  # (one per combination)

    assert _sweep(app, monkeypatch, say) == 0
    assert _said(caplog, "polybus: warning:") == [
        f"polybus: warning: modules.server.replication={n} is short" for n in (1, 2, 3)]
    repeats = [ln for ln in capsys.readouterr().err.splitlines() if "again" in ln]
    assert repeats == [f"polybus sweep: 1 more run said this warning again (said once, "
                       f"above): polybus: warning: modules.server.replication={n} is short"
                       for n in (1, 2, 3)]


def test_a_warning_of_one_kind_in_other_words_is_said_once(
        app: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    def say(run: int, sets: Sequence[str]) -> None:  # (the replicas taken in turn)
        log.warning("polybus: warning: using server-%d", (run - 1) % 3,
                    extra={KIND: "server unused"})

    assert _sweep(app, monkeypatch, say) == 0
    assert _said(caplog, "polybus: warning:") == ["polybus: warning: using server-0"]
    assert ("polybus sweep: 5 more runs said this warning again, 4 of them in other words "
            "(said once, above): polybus: warning: using server-0") in capsys.readouterr().err


@pytest.mark.filterwarnings("default::polybus.errors.ConfigWarning")
def test_a_configuration_note_is_said_once_though_a_run_changes_the_filters(
        app: str, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder,
        capsys: pytest.CaptureFixture[str]) -> None:
    def say(run: int, sets: Sequence[str]) -> None:
        # A client module imported anew each run that sets a filter of its own made
        # Python forget the notes it had said, and say them again.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.warn("modules.server.define.square.queue: queue = 5 has no effect",
                      ConfigWarning, stacklevel=1)

    assert _sweep(app, monkeypatch, say) == 0
    assert [str(w.message) for w in recwarn if w.category is ConfigWarning] == [
        "modules.server.define.square.queue: queue = 5 has no effect"]
    assert ("polybus sweep: 5 more runs said this warning again (said once, above): "
            "warning: modules.server.define.square.queue: queue = 5 has no effect"
            ) in capsys.readouterr().err


def test_after_the_sweep_warnings_are_said_as_ever(
        app: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert _sweep(app, monkeypatch, lambda run, sets: log.warning(COUNT)) == 0
    caplog.clear()
    log.warning(COUNT)  # (a plain run after: each said)
    log.warning(COUNT)
    assert _said(caplog, "polybus: warning:") == [COUNT, COUNT]
    assert logging.getLogger("polybus").propagate and not logging.getLogger("polybus").handlers


UNSEEN = ("polybus: warning: a call to 'f' failed and its error was never looked at (its "
          "promise was freed unused): RemoteException: ValueError: bad %d (raised in f on "
          "server-0)")


def test_long_warnings_that_differ_late_are_told_apart_in_their_counts(
        app: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """Two warnings alike in their first 100 characters (a failure never looked at,
    of another value) had their counts said in two identical lines."""
    def say(run: int, sets: Sequence[str]) -> None:
        log.warning(UNSEEN, 0)
        log.warning(UNSEEN, 3)

    assert _sweep(app, monkeypatch, say) == 0
    repeats = [ln for ln in capsys.readouterr().err.splitlines() if "again" in ln]
    assert len(repeats) == 2 and repeats[0] != repeats[1], repeats
    for line, n in zip(repeats, (0, 3), strict=True):
        assert line.startswith("polybus sweep: 5 more runs said this warning again (said "
                               "once, above): polybus: warning: a call to 'f' failed"), line
        assert f"ValueError: bad {n} (raised in f on server-0)" in line, line
        assert len(line) < 250, line  # (still a line, not the whole of each)


@pytest.mark.filterwarnings("default::polybus.errors.ConfigWarning")
def test_workers_settings_said_of_the_replicas_each_run_took_in_turn_are_one_warning(
        app: str, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Runs of a count at workers started by hand take them in turn, and the setting
    they apply that is not the run's was said anew of each (``server-0 has 2 where
    ...``, then ``server-1 has 2 ...``): one warning, said once, as its log lines are."""
    from polybus.client.handsettings import say_other_settings
    from polybus.config import load
    from polybus.wire.messages import Replica

    def say(run: int, sets: Sequence[str]) -> None:
        took = Replica(f"server-{(run - 1) % 3}", "server", "tcp://127.0.0.1:1",
                       ["square"], settings={"define.square.pool": "2"})
        say_other_settings(load(app, sets), "server", [(took, None)], set())

    assert _sweep(app, monkeypatch, say) == 0
    said = [str(w.message) for w in recwarn if w.category is ConfigWarning]
    assert len(said) == 1 and "server-0 has 2 where this run's configuration gives 1" \
        in said[0], said
    assert ("polybus sweep: 5 more runs said this warning again, 4 of them in other words "
            "(said once, above): warning: ") in capsys.readouterr().err
