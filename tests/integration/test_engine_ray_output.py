"""Under the ray engine, as under the local one, stdout carries the result alone: what
the replicas print, and Ray's own messages, go to stderr; a short run shows every line
the replicas printed, an unfinished last one too; a replica lost is said with what Ray
knows of its end. Each run is a private Ray in a loopback-only network namespace
(testing/engines.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from polybus.testing.apps import write_app
from polybus.testing.engines import TIMEOUT_S, command, unavailable

from .conftest import descendants

_LOUD = """\
    import os
    import sys

    print("imported", os.getpid())


    def work(i):
        for k in range(200):
            print("work", i, "line", k)
        print("to stderr", i, file=sys.stderr)
        sys.stdout.write(f"tail {i} without newline")
        sys.stdout.flush()
        return i * 2
"""
_DIES_ONCE = """\
    import os
    import signal


    def work(i):
        if i == "boom" and not os.path.exists("killed"):
            open("killed", "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return i * 2 if isinstance(i, int) else "ok"
"""
_CLIENT = """\
    from polybus import use, wait

    work = use("work")


    def main(kind):
        if kind == "boom":
            return [wait(work("boom")), wait(work(4))]
        return [wait(p) for p in [work(i) for i in range(5)]]
"""
_TOML = """\
    [modules.server]
    source = "server.py"
    replication = 2
    define.work = {{}}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["{kind}"]
    use.work = {{ callstyle = "async" }}

    [bind]
    "client.work" = "server.work"
"""


def _run(where: Path, server: str, kind: str) -> tuple[int, str, str]:
    """The run under a private Ray: its status, stdout and stderr (whatever is left of
    its session afterwards, Ray's daemons, killed: only it)."""
    app = write_app(where, server=server, client=_CLIENT, toml=_TOML.format(kind=kind))
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


@pytest.mark.slow
@pytest.mark.usefixtures("ray_here")
def test_replica_output_goes_to_stderr_every_line_of_a_short_run(tmp_path: Path) -> None:
    """(Ray's forwarding put it on stdout, mixed with the result, and a run this short
    lost all of it, the module's import-time line too.)"""
    before = descendants(os.getpid())
    status, out, err = _run(tmp_path, _LOUD, "lines")
    assert status == 0, err[-3000:]
    assert out == "[0, 2, 4, 6, 8]\n", out[-3000:]
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
    # what each replica printed last, unfinished, shows at the end
    assert sum(ln.endswith(" without newline") for ln in lines) == 2
    assert "outward address" not in err  # (a loopback-only namespace: nothing to warn of)
    assert descendants(os.getpid()) <= before


@pytest.mark.slow
@pytest.mark.usefixtures("ray_here")
def test_a_killed_actor_is_said_on_stderr_with_what_ray_knows(tmp_path: Path) -> None:
    """(Ray's "(raylet) A worker died ..." came on stdout, before the result, and the
    loss's warning said only that the connection closed.)"""
    status, out, err = _run(tmp_path, _DIES_ONCE, "boom")
    assert status == 0, err[-3000:]
    assert out == "['ok', 8]\n", out[-3000:]
    lost = [ln for ln in err.splitlines() if " was lost: " in ln]
    assert len(lost) == 1, err[-3000:]
    assert "; its worker (a Ray actor) ended: " in lost[0], lost
    assert "(Ray: SYSTEM_ERROR)" in lost[0], lost
