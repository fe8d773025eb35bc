"""Under the ray engine, as under the local one, stdout carries the result alone: what
the replicas print, and Ray's own messages, go to stderr; a short run shows every line
the replicas printed, an unfinished last one too; a replica lost is said with what Ray
knows of its end. The run is a private Ray in a loopback-only network namespace
(testing/engines.py): one run shows both, its replicas printing, then one of them
killed (a private Ray's start is most of a run's time).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from polybus.testing.apps import write_app
from polybus.testing.engines import TIMEOUT_S, command, unavailable

from .conftest import descendants

_SERVER = """\
    import os
    import signal
    import sys

    print("imported", os.getpid())


    def work(i):
        if i == "boom":  # (the replica it first comes to is killed; its next, answers)
            if not os.path.exists("killed"):
                open("killed", "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
            return "ok"
        for k in range(200):
            print("work", i, "line", k)
        print("to stderr", i, file=sys.stderr)
        sys.stdout.write(f"tail {i} without newline")
        sys.stdout.flush()
        return i * 2
"""
_CLIENT = """\
    from polybus import use, wait

    work = use("work")


    def main():
        lines = [wait(p) for p in [work(i) for i in range(5)]]
        return [lines, wait(work("boom")), wait(work(5))]
"""
_TOML = """\
    [modules.server]
    source = "server.py"
    replication = 2
    define.work = {}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.work = { callstyle = "async" }

    [bind]
    "client.work" = "server.work"
"""


def _run(where: Path) -> tuple[int, str, str]:
    """The run under a private Ray: its status, stdout and stderr (whatever is left of
    its session afterwards, Ray's daemons, killed: only it)."""
    app = write_app(where, server=_SERVER, client=_CLIENT, toml=_TOML)
    proc = subprocess.Popen(command("ray", app, 2, where / "result.json"), cwd=where,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.returncode is None:
            proc.communicate()
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.fixture
def ray_here() -> None:
    if why := unavailable("ray"):
        pytest.skip(f"ray engine: {why}")


def _every_line_on_stderr(err: str) -> None:
    """Every line each replica printed, in its order, led by the replica's name; its
    import-time line; what each printed last, unfinished, at the end."""
    lines = err.splitlines()
    for i in range(5):
        said = [ln for ln in lines if ln.endswith(f") work {i} line 199")]
        assert len(said) == 1 and said[0].startswith("(server-"), said
        replica = said[0].split(")")[0] + ")"  # (the replica that ran the call)
        # (line 0 follows the unfinished last line of the replica's call before, if any)
        assert any(ln.startswith(replica) and ln.endswith(f"work {i} line 0") for ln in lines)
        for k in range(1, 200):
            assert f"{replica} work {i} line {k}" in lines
        assert f"{replica} to stderr {i}" in lines
    assert sum(ln.startswith(("(server-0) imported", "(server-1) imported"))
               for ln in lines) == 2
    # what each replica printed last, unfinished, shows at the end (the one killed: in
    # its last call before the kill)
    assert sum(ln.endswith(" without newline") for ln in lines) == 2
    assert "outward address" not in err  # (a loopback-only namespace: nothing to warn of)


def _the_killed_actor_said(err: str) -> None:
    """The loss's warning says what Ray knows of the actor's end."""
    lost = [ln for ln in err.splitlines() if " was lost: " in ln]
    assert len(lost) == 1, err[-3000:]
    assert "; its worker (a Ray actor) ended: " in lost[0], lost
    assert "(Ray: SYSTEM_ERROR)" in lost[0], lost


@pytest.mark.slow
@pytest.mark.usefixtures("ray_here")
def test_replica_output_goes_to_stderr_every_line_and_a_killed_actor_is_said_there(
        tmp_path: Path) -> None:
    """(Ray's forwarding put the replicas' output on stdout, mixed with the result, and
    a run this short lost all of it, the module's import-time line too; Ray's "(raylet)
    A worker died ..." came on stdout, before the result, and the loss's warning said
    only that the connection closed.)"""
    before = descendants(os.getpid())
    status, out, err = _run(tmp_path)
    assert status == 0, err[-3000:]
    assert out == "[[0, 2, 4, 6, 8], 'ok', 10]\n", out[-3000:]
    _every_line_on_stderr(err)
    _the_killed_actor_said(err)
    assert descendants(os.getpid()) <= before
