"""A run its program ended with an error says how many of its calls were still under way
then (runner.py, client/unseen.py `note_hushed`): they go unfinished, failures and all,
so the count of "more calls failed" below it differs from run to run; a new user saw
"9 more", "4 more", "2 more" or none for the same program and could not tell why."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
    import time

    def f(i):
        if i == 3:
            raise ValueError("bad 3")
        time.sleep(1)  # (still running, or queued behind, when the program ends)
        return i
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.f = { callstyle = "async" }

    [bind]
    "client.f" = "server.f"
"""

CLIENT = """
    from polybus import use, wait

    f = use("f")

    def main():
        ps = [f(3)] + [f(i) for i in range(10, 20)]
        return wait(ps[0])
"""


@pytest.mark.timeout(60)
def test_the_calls_still_under_way_when_the_program_raised_are_counted(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    p = cli("run", app, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "ValueError: bad 3" in p.stderr, p.stderr
    # (one replica of one handler: f(3) answered at once, the ten others each 1 s long)
    assert ("\n  10 calls the program made were still under way when it ended and went "
            "unfinished (their outcomes, failures included, are not known)") in p.stderr, p.stderr


@pytest.mark.timeout(60)
def test_a_run_that_ends_well_says_nothing_of_the_kind(tmp_path: Path) -> None:
    one_call = CLIENT.replace("f(3)] + [f(i) for i in range(10, 20)]", "f(4)]")
    app = write_app(tmp_path, server=SERVER, client=one_call, toml=TOML)
    p = cli("run", app, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "still under way" not in p.stderr, p.stderr
