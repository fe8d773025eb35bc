"""`polybus run` under the ray engine stopped by SIGTERM while its private Ray starts
(``ray.init``, a second or more): the run ends as a SIGTERM ends it under every engine,
`polybus run: terminated`, status 143, and leaves no process and no Ray directory. Ray's
own handler, set for the length of ``ray.init``, made it `sys.exit(15)`: status 15 and
not a word. The run is a private Ray in a loopback-only network namespace
(testing/engines.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from polybus.testing.apps import write_one_call_app
from polybus.testing.engines import TIMEOUT_S, command, unavailable

GONE_S = 30.0  # for Ray's agents to end once their raylet is gone (they look for it)


def _session(sid: int) -> dict[int, str]:
    """The processes of session ``sid`` (the run's, started in a session of its own),
    live ones only: pid -> command line."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) != sid or fields[0] == "Z":
                continue
            out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return out


def _stopped(where: Path, when: Callable[[int, set[Path]], bool],
             stop: Callable[[int], None]) -> tuple[int, str, dict[int, str], set[Path]]:
    """A two-replica run under a private Ray, stopped by ``stop(pid)`` once
    ``when(pid, its new Ray directories)``: its status, its stderr, the processes of its
    session left once Ray's agents had time to end, and the Ray directories left."""
    app = write_one_call_app(where, server_keys="replication = 2")
    dirs = Path("/tmp") if len(tempfile.gettempdir()) > 40 else Path(tempfile.gettempdir())
    before = set(dirs.glob("polybus-ray-*"))
    proc = subprocess.Popen(command("ray", app, 2, where / "out.json"), cwd=where,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not when(proc.pid, set(dirs.glob("polybus-ray-*")) - before):
            assert proc.poll() is None and time.monotonic() < deadline, "not seen started"
            time.sleep(0.01)
        stop(proc.pid)
        _, err = proc.communicate(timeout=TIMEOUT_S)
        deadline = time.monotonic() + GONE_S
        while (left := _session(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # (the session's group: this test's alone)
        except ProcessLookupError:
            pass
        if proc.returncode is None:
            proc.communicate()
    return proc.returncode, err.decode(errors="replace"), left, set(
        dirs.glob("polybus-ray-*")) - before


@pytest.mark.slow
def test_sigterm_while_the_private_ray_starts_ends_the_run_as_sigterm_does(
        tmp_path: Path) -> None:
    if why := unavailable("ray"):
        pytest.skip(f"ray engine: {why}")
    # (Ray's GCS is the first daemon ray.init starts)
    status, said, left, dirs = _stopped(
        tmp_path, lambda pid, _: any("gcs_server" in c for c in _session(pid).values()),
        lambda pid: os.kill(pid, signal.SIGTERM))
    assert status == 128 + signal.SIGTERM, said[-3000:]
    assert "polybus run: terminated" in said, said[-3000:]
    assert not left, left
    assert not dirs, dirs

