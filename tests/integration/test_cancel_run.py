"""``p.cancel()`` in a run of its own (real worker processes): a call queued on a
replica that runs one call at a time, behind a call that runs until the client makes a
flag file, is cancelled and never runs (the file it would write is never written),
while the call made after it runs; the run's figures count it (``cancelled``)."""

from __future__ import annotations

import json
from pathlib import Path

import polybus
from integration.conftest import cli
from polybus.testing.apps import write_bound_app

SERVER = '''\
import os
import time
from pathlib import Path


def mark(name, flag):
    """Writes the file ``name`` once ``flag`` exists (at most 60 s); returns ``name``."""
    end = time.monotonic() + 60
    while not os.path.exists(flag) and time.monotonic() < end:
        time.sleep(0.005)
    Path(name).write_text(str(os.getpid()))
    return name
'''
CLIENT = '''\
from pathlib import Path

import polybus
from polybus import use, wait

mark = use("mark")


def main(where):
    flag = str(Path(where) / "flag")
    first = mark(str(Path(where) / "first"), flag)  # runs until the flag is there
    second = mark(str(Path(where) / "second"), flag)  # queued behind it
    third = mark(str(Path(where) / "third"), flag)
    said = [second.cancel(), first.cancel(), second.cancelled(), second.done]
    Path(flag).write_text("go")
    try:
        wait(second)
    except polybus.CancelledError as e:
        said.append(type(e).__name__)
    return said + [Path(wait(first)).name, Path(wait(third)).name]
'''


def _app(tmp_path: Path) -> Path:
    return write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("mark",),
                           server_keys="replication = 1\ndefine.mark = { pool = 1 }",
                           client_keys=f'args = [{str(tmp_path)!r}]\n'
                                       'use.mark = { callstyle = "async" }')


def test_a_queued_call_cancelled_in_a_run_never_runs(tmp_path: Path) -> None:
    r = polybus.run(_app(tmp_path), worker_output=False)
    assert r.result == [True, False, True, True, "CancelledError", "first", "third"]
    assert (tmp_path / "first").exists() and (tmp_path / "third").exists()
    assert not (tmp_path / "second").exists()  # (third ran after its place: it never ran)
    assert r.interfaces["client.mark"]["cancelled"] == 1
    assert r.interfaces["client.mark"]["calls"] == 3
    assert [rep.calls for rep in r.replicas] == [2]


def test_the_summary_and_json_say_the_calls_cancelled(tmp_path: Path) -> None:
    _app(tmp_path)
    p = cli("run", "app.toml", "--json", "run.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["interfaces"]["client.mark"]["cancelled"] == 1
    assert "client.mark: 1 cancelled\n" in p.stderr, p.stderr
    assert not (tmp_path / "second").exists()
