"""A run that the program's exception ends counts the calls whose failures had come
(unread: the program never looked) as failed, not as still under way.

Found by a new-user trial: twelve async calls failed remotely, the program slept (their
answers came, unread) and raised; the note said "12 calls the program made were still
under way when it ended and went unfinished (their outcomes, failures included, are not
known)", though all twelve had failed. The answers already here are taken in, never
waiting, before the note is written (client/drain.py `arrived`)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import polybus
from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """
    def boom(i, mark=None):
        if mark is not None:  # (run after the others, whose answers went before it)
            open(mark, "w").close()
            return "marked"
        return 1 // i
"""
CLIENT = """
    import os
    import time

    from polybus import use

    boom = use("boom")

    def main(mark):
        ps = [boom(0) for _ in range(12)]  # each fails (ZeroDivisionError), unread
        ps.append(boom(1, mark))
        while not os.path.exists(mark):  # (the failures' answers are here by then;
            time.sleep(0.01)  # nothing of polybus runs meanwhile: none is read)
        raise RuntimeError("the program's own")
"""
TOML = """
    [modules.server]
    source = "server.py"
    transport = "tcp"
    define.boom = {{ pool = 1 }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["{mark}"]
    use.boom = {{ callstyle = "async" }}

    [bind]
    "client.boom" = "server.boom"
"""
FAILED = ("12 calls failed with errors never looked at before the run ended "
          "(RemoteException)")


def _under_way(notes: list[str]) -> list[str]:
    """The notes that count calls still under way: the marking call's, at most (its
    own answer may not have come)."""
    return [n for n in notes if "still under way" in n]


@pytest.mark.timeout(60)
def test_failures_that_came_unread_are_counted_as_failed(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(mark=tmp_path / "mark"))
    with pytest.raises(RuntimeError) as e:
        polybus.run(app)
    notes = list(e.value.__notes__)
    del e
    gc.collect()
    assert FAILED in notes, notes
    assert all(n.startswith("1 call the program made was still under way")
               for n in _under_way(notes)), notes


@pytest.mark.timeout(60)
def test_the_command_line_says_so_too(tmp_path: Path) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.format(mark=tmp_path / "mark"))
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode != 0
    assert f"\n{FAILED}\n" in p.stderr, p.stderr
    assert "12 calls the program made were still under way" not in p.stderr, p.stderr
