"""A rank whose replica stops while serving, under a real mpiexec: a thread of its worker
ends by an exception (a fault in polybus, made to order here as in
test_serve_restart.py). The rank tells rank 0 at once, and the run says which rank
and why, then goes on as it does when a local worker is lost: calls go to the replica
left, or fail when none is. (The rank waited 60 s for a stop rank 0 never sent, then
15 s at the last barrier, and aborted the job: 75 s, and the run ended as if mpiexec
had been interrupted, not a word of why.)"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from polybus.testing.apps import waiting_client, write_bound_app
from polybus.testing.engines import TIMEOUT_S, command, launch, mpi_unavailable, session

from .conftest import descendants, read_line, rest_of

# Well under the 75 s the rank took to end the job: a bound on the wait, not a timing
SAID_S = 40.0


@pytest.fixture(autouse=True)
def _need_mpi() -> None:
    if why := mpi_unavailable():
        pytest.skip(f"mpi engine: {why}")


# Once die() has run, the worker's next look for held answers raises outside any call's
# steps, and that thread ends (worker/runtime.py, `_guarded`).
SERVER = """\
import os
import threading as _threading

from polybus.worker.runtime import WorkerRuntime as _Runtime

_doomed = _threading.Event()
_release_held = _Runtime._release_held


def _broken(self, *, every):
    if _doomed.is_set():
        raise RuntimeError("injected fault in the serving thread")
    return _release_held(self, every=every)


_Runtime._release_held = _broken


def die():
    _doomed.set()
    return os.getpid()


def f(x):
    return os.getpid()
"""

# Calls f until the test has seen the run say the rank stopped (it writes "seen"), for
# 60 s at most; then one call more, answered by the replica left.
GOES_ON = """\
import time
from pathlib import Path

from polybus import use, wait

die = use("die")
f = use("f")


def main():
    died = wait(die())
    calls = 0
    deadline = time.monotonic() + 60
    while not Path("seen").exists() and time.monotonic() < deadline:
        wait(f(calls))
        calls += 1
        time.sleep(0.02)
    return {"died": died, "seen": Path("seen").exists(), "last": wait(f(-1))}
"""

STOPPED = (r"polybus: warning: worker (server-\d) \(mpi rank (\d)\) stopped: its thread "
           r"polybus-server-\d-\S+ ended by RuntimeError: injected fault in the serving "
           r"thread")


def test_a_rank_whose_thread_dies_is_said_and_the_run_goes_on(tmp_path: Path) -> None:
    before = descendants(os.getpid())
    app = write_bound_app(tmp_path, server=SERVER, client=GOES_ON, names=("die", "f"),
                          server_keys="replication = 2")
    with session(command("mpi", app, 2, tmp_path / "out.json"), tmp_path) as (proc, out):
        said = read_line(out, STOPPED, timeout=SAID_S)
        (tmp_path / "seen").touch()
        rest = rest_of(out, timeout=TIMEOUT_S)
        proc.wait(timeout=TIMEOUT_S)
    name, rank = said.group(1), said.group(2)
    assert int(rank) == 1 + int(name.rsplit("-", 1)[1])  # (replica_of's order)
    assert proc.returncode == 0, rest  # the program's own status, as under the local engine
    got = json.loads((tmp_path / "out.json").read_text())["result"]
    assert got["seen"] and got["last"] != got["died"], got
    # Its loss, when the client saw the connection close, says how its worker ended: the
    # rank's report is waited for (mpireports.HOW_S, on a thread of the session's, not
    # on the reactor's path: client/lossline.py) before the loss is said, so a loss
    # said after the report names it. (A report later than that wait came after the
    # loss was said, before the line read_line took: that loss line is not in ``rest``.)
    lost = [ln for ln in rest.splitlines() if f"replica {name} of module 'server' was lost: " in ln]
    for ln in lost:
        assert f"; its worker (mpi rank {rank}) stopped: its thread polybus-{name}-" in ln, ln
    assert descendants(os.getpid()) <= before


ALONE = """\
from polybus import use, wait

die = use("die")
f = use("f")


def main():
    wait(die())
    while True:  # (until the replica's loss fails a call)
        wait(f(0))
"""


def test_a_rank_whose_thread_dies_alone_fails_the_run_saying_why(tmp_path: Path) -> None:
    """The only replica: the run fails as the local engine's does when its worker is
    lost, and its error says which rank stopped and why."""
    before = descendants(os.getpid())
    app = write_bound_app(tmp_path, server=SERVER, client=ALONE, names=("die", "f"))
    status, out = launch(command("mpi", app, 1, tmp_path / "out.json"), tmp_path)
    assert status != 0, out
    assert "every replica of f is gone" in out or "no replica" in out.lower(), out
    assert ("worker server-0 (mpi rank 1) stopped: its thread polybus-server-0-" in out
            and "ended by RuntimeError: injected fault in the serving thread" in out), out
    assert descendants(os.getpid()) <= before


def test_ranks_that_cannot_start_with_long_errors_reach_the_end(tmp_path: Path) -> None:
    """Each of two ranks sends its error; rank 0 raises the first, and takes the other
    while it waits at the last barrier. An error too long for MPI's eager send waits for
    its receive: not taken, it held its rank in the send, and the job was aborted."""
    before = descendants(os.getpid())
    app = write_bound_app(tmp_path, server='raise RuntimeError("refused " + "x" * 200_000)\n',
                          client="def main():\n    return 1\n", names=(),
                          server_keys="replication = 2")
    status, out = launch(command("mpi", app, 2, tmp_path / "out.json"), tmp_path)
    assert status != 0
    assert re.search(r"polybus run: error: worker server-\d \(mpi rank \d\) could not start: "
                     r"module 'server' \(server\.py\) failed to import: RuntimeError: "
                     r"refused x", out), out[-2000:]
    assert "MPI_ABORT" not in out, out[-2000:]
    assert descendants(os.getpid()) <= before


# Says which rank serves it (Open MPI's environment), then waits in the call
KILLED_SERVER = """\
import os
import threading
from pathlib import Path


def f(x):
    Path(f"serving-{os.getpid()}-{os.environ['OMPI_COMM_WORLD_RANK']}").touch()
    threading.Event().wait(60)  # (answered only if nobody ends the run first)
    return x
"""


def test_a_rank_killed_mid_call_is_named_when_the_launcher_ends_the_job(
        tmp_path: Path) -> None:
    """A rank that dies ends the whole job (the launcher's rule): rank 0 has seen its
    replica's connection close, then gets the launcher's stop, and says that replica was
    lost, not only "Ctrl-C, or a signal sent to mpiexec" (it named only those)."""
    before = descendants(os.getpid())
    app = write_bound_app(tmp_path, server=KILLED_SERVER, names=("f",),
                          client=waiting_client("f"), server_keys="replication = 2",
                          client_keys='use.f = { callstyle = "async" }')
    with session(command("mpi", app, 2, tmp_path / "out.json"), tmp_path) as (proc, out):
        read_line(out, "waiting", timeout=TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while not (serving := list(tmp_path.glob("serving-*"))):
            assert time.monotonic() < deadline, "no rank took the call"
            time.sleep(0.02)
        _, pid, rank = serving[0].name.split("-")
        os.kill(int(pid), signal.SIGKILL)
        said = read_line(out, "polybus run: .*", timeout=TIMEOUT_S).group(0)
        proc.wait(timeout=TIMEOUT_S)
    assert said.startswith(
        f"polybus run: interrupted (mpiexec ended the job, after replica server-{int(rank) - 1} "
        f"(mpi rank {rank}) was lost: a rank that dies ends the job, as Ctrl-C or a signal "
        "sent to mpiexec does) while the program was at "), said
    assert proc.returncode != 0
    error = json.loads((tmp_path / "out.json").read_text())["error"]
    assert error["type"] == "LauncherStopped", error
    assert descendants(os.getpid()) <= before


DIES_IN_CALL = """\
import os
import signal


def f(x):
    if not os.path.exists("killed"):
        open("killed", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return x
"""


def _ended_by_the_launcher(tmp_path: Path, server: str) -> str:
    """What a run of ``server`` (2 replicas, one call of f) says, ended by mpiexec."""
    app = write_bound_app(tmp_path, server=server, names=("f",),
                          client="from polybus import use\n\nf = use('f')\n\n\n"
                                 "def main():\n    return f(1)\n",
                          server_keys="replication = 2")
    status, out = launch(command("mpi", app, 2, tmp_path / "out.json"), tmp_path)
    assert status != 0, out  # (the launcher ends the job: its own status)
    return out


def test_a_rank_dead_as_the_run_ends_is_still_said_lost(tmp_path: Path) -> None:
    """The call re-run on the replica left, the program returns; the session's close
    waits for the dead rank's report (which never comes) and the launcher's stop lands
    in that wait: the loss line is said all the same (it was dropped, 7 runs in 7)."""
    before = descendants(os.getpid())
    out = _ended_by_the_launcher(tmp_path, DIES_IN_CALL)
    lost = re.search(r"polybus: warning: replica (server-\d) of module 'server' was lost: ",
                     out)
    assert lost is not None, out[-3000:]
    assert (f"polybus run: interrupted (mpiexec ended the job, after replica {lost.group(1)} "
            f"(mpi rank ") in out, out[-3000:]
    assert descendants(os.getpid()) <= before


DIES_AT_IMPORT = """\
import os
import signal

if os.environ.get("OMPI_COMM_WORLD_RANK") == "2":
    os.kill(os.getpid(), signal.SIGKILL)


def f(x):
    return x
"""


def test_a_rank_dead_at_its_import_is_named_as_not_started(tmp_path: Path) -> None:
    """A rank killed while importing its module (a crash in an extension, say) sends no
    error: the launcher ends the job while rank 0 waits for the replicas to register.
    The run names the replicas not started then (it said only "Ctrl-C, or a signal sent
    to mpiexec")."""
    before = descendants(os.getpid())
    out = _ended_by_the_launcher(tmp_path, DIES_AT_IMPORT)
    said = re.search(r"polybus run: interrupted \(mpiexec ended the job while (.*) had not "
                     r"started: a rank that dies ends the job, as Ctrl-C or a signal sent to "
                     r"mpiexec does\)", out)
    assert said is not None, out[-3000:]
    # (the rank that died; server-0 too if the job ended before it had registered)
    assert said.group(1) in ("server-1 (mpi rank 2)",
                             "server-0 (mpi rank 1), server-1 (mpi rank 2)"), said.group(1)
    assert descendants(os.getpid()) <= before
