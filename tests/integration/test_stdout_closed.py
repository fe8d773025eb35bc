"""Standard output whose reader has gone (`polybus run app.toml | head`, the reader
ended first): the result's print raised BrokenPipeError out of polybus, a raw
traceback with the summary lost; `check` did the same, and `sweep`'s table and
`bench --list` ended with status 1, unsaid. Now the run says it in one line, its
summary still written, and the others end quietly, status 1 (as Python's own advice
for a closed pipe), never with a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from integration.conftest import POLYBUS, descendants, env_with, kill_all
from polybus.testing.apps import write_one_call_app


def _reader_gone(*args: str | Path, cwd: Path) -> tuple[int, str]:
    """``polybus ARGS`` with its standard output a pipe whose reader closed before
    anything was written: its status and stderr."""
    r, w = os.pipe()
    os.close(r)
    p = subprocess.Popen([*POLYBUS, *map(str, args)], stdout=w, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, env=env_with(), cwd=cwd)
    os.close(w)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_all(descendants(p.pid))
        p.kill()
        p.communicate()
        raise AssertionError(f"polybus {args} did not finish in 60 s") from None
    return p.returncode, err


def test_a_run_whose_reader_has_gone_says_so_and_writes_its_summary(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server_keys="replication = 0")  # (no worker)
    status, err = _reader_gone("run", app, cwd=tmp_path)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert status == 1, err
    assert ("polybus run: the result could not be written: standard output was closed "
            "(its reader ended, as `head` does)") in err, err
    assert "elapsed" in err and "1 call" in err, err  # (the summary, as ever)


def test_other_commands_whose_reader_has_gone_end_quietly(tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path)  # (checked alone: nothing starts)
    for args in (["check", app, "--no-import"], ["bench", "--list"]):
        status, err = _reader_gone(*args, cwd=tmp_path)
        assert (status, err) == (1, ""), (args, status, err)
