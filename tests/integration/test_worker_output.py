"""What a server function prints reaches the run's stderr, prefixed with its replica's
name, as with Ray's workers; it had gone to a log deleted after the run (stdout to
/dev/null). The workers' banner is not forwarded; nothing printed before the end is lost."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """\
    import os
    import sys

    print("top-level of", os.environ.get("NOTHING", "the module"))


    def shout(x):
        print(f"MARK-out {x}")
        print(f"MARK-err {x}", file=sys.stderr)
        return x + 1


    def last_words(n):
        for i in range(n):
            print(f"line {i:05d}")
        print("no newline at the end", end="")
        return n
"""
CLIENT = """\
    from polybus import use

    shout = use("shout")
    last_words = use("last_words")


    def main(n, words):
        total = sum(shout(i) for i in range(n))
        return (total, last_words(words))   # the run ends as soon as this answers
"""
TOML = """\
    [modules.server]
    source = "server.py"
    replication = 2

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [4, 0]
    use.shout = { callstyle = "sync" }
    use.last_words = { callstyle = "sync" }

    [bind]
    "client.shout" = "server.shout"
    "client.last_words" = "server.last_words"
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)


def forwarded(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("(server-")]


def test_the_cli_forwards_worker_output_to_stderr_with_the_replica_name(app: Path) -> None:
    p = cli("run", app)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "(10, 0)"  # the result alone: no worker line on stdout
    assert "MARK" not in p.stdout
    lines = forwarded(p.stderr)
    # round robin: calls 0 and 2 on server-0, 1 and 3 on server-1; each line whole
    for x in range(4):
        who = f"(server-{x % 2})"
        assert f"{who} MARK-out {x}" in lines and f"{who} MARK-err {x}" in lines, p.stderr
    assert "(server-0) top-level of the module" in lines  # the module's import too
    assert "(server-1) top-level of the module" in lines
    assert "serving" not in p.stderr  # the banner is polybus's, not the program's
    assert "server-0" in p.stderr and "calls" in p.stderr  # the summary, after them
    assert p.stderr.index("MARK-out 0") < p.stderr.index("elapsed")


def test_quiet_keeps_worker_output_and_no_worker_output_drops_it(app: Path) -> None:
    quiet = cli("run", app, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "elapsed" not in quiet.stderr  # --quiet: no summary ...
    assert "(server-0) MARK-out 0" in forwarded(quiet.stderr)  # ... the program's output
    hidden = cli("run", app, "--quiet", "--no-worker-output")
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.strip() == "(10, 0)"
    assert "MARK" not in hidden.stderr + hidden.stdout and not forwarded(hidden.stderr)


def test_polybus_run_forwards_to_sys_stderr(app: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    r = polybus.run(app)
    assert r.result == (10, 0)
    out, err = capsys.readouterr()
    assert "MARK" not in out
    lines = forwarded(err)
    assert "(server-0) MARK-out 0" in lines and "(server-1) MARK-err 1" in lines, err
    assert "serving" not in err


def test_polybus_run_output_goes_to_fd_2_not_fd_1(app: Path,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    polybus.run(app)
    out, err = capfd.readouterr()
    assert "MARK" not in out
    assert "(server-1) MARK-out 3" in forwarded(err), err


def test_polybus_run_to_a_stream_of_ones_choice_or_nowhere(
        app: Path, capfd: pytest.CaptureFixture[str]) -> None:
    stream = io.StringIO()
    polybus.run(app, worker_output=stream)
    assert "(server-0) MARK-err 2" in forwarded(stream.getvalue())
    polybus.run(app, worker_output=False)
    out, err = capfd.readouterr()
    assert "MARK" not in out + err


def test_output_printed_just_before_the_run_ends_is_not_lost(
        app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words = 3000
    r = polybus.run(app, {"modules.client.args": [0, words]})
    assert r.result == (0, words)
    lines = forwarded(capsys.readouterr().err)
    who = next(ln.split(" ", 1)[0] for ln in lines if ln.endswith(" line 00000"))
    mine = [ln.removeprefix(who + " ") for ln in lines if ln.startswith(who + " ")]
    said = [ln for ln in mine if ln.startswith("line ")]
    assert said == [f"line {i:05d}" for i in range(words)]  # every line, in order
    assert mine[-1] == "no newline at the end"  # flushed as its worker ended
