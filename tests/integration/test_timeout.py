"""--timeout: a run that hangs is stopped and says where it was (`run`, exit 124), a
sweep's hung combination fails its own cell and the sweep goes on, and
`polybus.run(timeout=...)` raises RunTimeout; their workers are stopped each time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import polybus
from integration.conftest import Procs, finish
from polybus.testing.apps import write_one_call_app
from polybus.wherestopped import where_stopped

SERVER = """
import threading


def f(x):
    if x == 2:
        threading.Event().wait(600)  # (a call that never ends)
    return x
"""

CLIENT = """
from polybus import use

f = use("f")


def main(x=1):
    return f(x)
"""

def _where(app: Path, seconds: str) -> str:
    return (f"timed out after {seconds} s while the program was at "
            f"{app.parent / 'client.py'}, line 8, in main; it was waiting for a call to "
            "f on server-0")


def test_a_sweep_reports_a_hung_combination_in_its_cell_and_goes_on(
        procs: Procs, tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    js = tmp_path / "s.json"
    p = procs.start("sweep", app, "--vary", "modules.client.args=[1],[2],[3]",
                    "--repeat", "2", "--timeout", "1.5", "--no-worker-output", "--json", js)
    out, err = finish(p, timeout=120)
    assert p.returncode == 1, err  # (a failed cell)
    cells = {json.dumps(c["config"]["modules.client.args"], separators=(",", ":")): c
             for c in json.loads(js.read_text())["cells"]}  # (typed: [1], [2], [3])
    assert cells["[2]"]["error"].startswith(_where(app, "1.5")), cells["[2]"]["error"]
    assert (cells["[2]"]["elapsed_s"], cells["[2]"]["runs"]) == ([], 1)  # (round 2 left out)
    assert [len(cells[k]["elapsed_s"]) for k in ("[1]", "[3]")] == [2, 2]
    assert "failed in run 1 of 2 (1 not run): timed out after 1.5 s" in out


def test_run_timeout_stops_the_run_and_says_where(procs: Procs, tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    js = tmp_path / "r.json"
    p = procs.start("run", app, "--set", "modules.client.args=[2]", "--timeout", "0.5",
                    "--no-worker-output", "--json", js)
    _, err = finish(p, timeout=60)
    assert p.returncode == 124, err
    assert f"polybus run: {_where(app, '0.5')}" in err
    error = json.loads(js.read_text())["error"]
    assert error["type"] == "RunTimeout" and error["message"].startswith(_where(app, "0.5"))


def test_a_run_within_its_limit_is_not_stopped(procs: Procs, tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    p = procs.start("run", app, "--timeout", "60", "--quiet", "--no-worker-output")
    out, err = finish(p, timeout=60)
    assert p.returncode == 0, err
    assert out.strip() == "1"


@pytest.mark.parametrize(("bad", "said"), [
    ("0", "argument --timeout: expected a duration > 0"),
    ("-2", "argument --timeout: expected a duration > 0"),
    ("nan", "argument --timeout: expected a duration > 0"),
    ("soon", "argument --timeout: expected a duration > 0"),
    ("inf", "argument --timeout: expected a duration > 0"),
    ("2e9", "--timeout must be at most 1e+09 s")])
def test_a_bad_timeout_is_refused_before_anything_runs(procs: Procs, tmp_path: Path,
                                                       bad: str, said: str) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    for command in ("run", "sweep"):
        extra = ["--vary", "modules.client.args=[1]"] if command == "sweep" else []
        p = procs.start(command, app, *extra, f"--timeout={bad}")
        _, err = finish(p, timeout=60)
        assert p.returncode == 2, err
        assert f"polybus {command}: error: {said}" in err, err


def test_a_timeout_is_a_duration_as_the_configuration_writes_one(procs: Procs,
                                                                 tmp_path: Path) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    p = procs.start("run", app, "--set", "modules.client.args=[2]", "--timeout", "500ms",
                    "--no-worker-output")
    _, err = finish(p, timeout=60)
    assert p.returncode == 124, err
    assert "polybus run: timed out after 0.5 s while" in err, err


def test_polybus_run_raises_run_timeout_and_the_next_run_works(
        tmp_path: Path, no_worker_left: None) -> None:
    """Its workers (one still running the call that never ends, whose answer nobody
    will read: not waited for) are gone when each run ends (by PID: no_worker_left)."""
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    with pytest.raises(polybus.RunTimeout) as got:
        polybus.run(app, ["modules.client.args=[2]"], worker_output=False, timeout=0.5)
    assert where_stopped(got.value).startswith(
        f" while the program was at {app.parent / 'client.py'}, line 8, in main")
    assert polybus.run(app, worker_output=False, timeout=30).result == 1


def _timed_out(app: Path, *sets: str) -> str:
    """What `polybus.run` of ``app`` with ``sets`` says when its 0.5 s limit passes."""
    with pytest.raises(polybus.RunTimeout) as got:
        polybus.run(app, list(sets), worker_output=False, timeout=0.5)
    return where_stopped(got.value)


def test_a_program_that_catches_the_interrupt_still_times_out(tmp_path: Path) -> None:
    client = CLIENT.replace("    return f(x)", "    try:\n        time.sleep(30)\n"
                            "    except KeyboardInterrupt:\n        return 'caught'")
    app = write_one_call_app(tmp_path, server=SERVER, client="import time\n" + client)
    said = _timed_out(app)
    assert "it was past its limit when its entrypoint returned" in said, said


@pytest.mark.parametrize("replication", [1, 2])
def test_the_call_waited_for_is_named_over_one_replica_or_several(
        tmp_path: Path, replication: int) -> None:
    app = write_one_call_app(tmp_path, server=SERVER, client=CLIENT)
    said = _timed_out(app, "modules.client.args=[2]",
                      f"modules.server.replication={replication}")
    assert re.search(r"; it was waiting for a call to f on server-[01]", said), said


def test_the_programs_own_line_is_named_not_the_standard_librarys(tmp_path: Path) -> None:
    client = CLIENT.replace("    return f(x)", "    t = threading.Thread(target=time.sleep, "
                            "args=(30,), daemon=True)\n    t.start()\n    t.join()")
    app = write_one_call_app(tmp_path, server=SERVER,
                             client="import threading\nimport time\n" + client)
    said = _timed_out(app)
    assert said.startswith(f" while the program was at {app.parent / 'client.py'}, "), said


def test_a_call_never_waited_for_that_hangs_the_end_of_the_run_is_said(tmp_path: Path) -> None:
    client = CLIENT.replace("    return f(x)", "    f(x)  # (never waited for)")
    app = write_one_call_app(tmp_path, server=SERVER, client=client)
    said = _timed_out(app, "modules.client.args=[2]", 'modules.client.use.f.callstyle="async"')
    assert "it was waiting for 1 call(s) the program made and never waited for" in said, said
