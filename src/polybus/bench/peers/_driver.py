"""Run a peer program as a child and read its one JSON line of figures.

The child is started through :mod:`._proc` (recorded by PID) in a session of its own,
so that whatever it starts in turn (mpiexec's ranks, Ray's daemons, Dask's worker
processes) shares its process group: after the child is reaped, the group is killed
too, so nothing outlives the measurement even if the peer's own shutdown failed; and so
is every process of ours left in its session (Open MPI's launcher puts each rank in a
process group of its own: killed with the launcher's group, they lived on). A
``cleanup`` then removes what the killed child could not (mpi.py: Open MPI's session
directory).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from polybus.bench.peers import PeerUnavailable
from polybus.bench.peers._proc import reap, spawn

__all__ = ["loopback_only_prefix", "run_json"]

_netns: list[str] | None = None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_session(sid: int) -> None:
    """SIGKILL every process of this user in session ``sid`` (the session of a child
    started with ``new_session``: its pid), whatever its process group. Linux (/proc)
    only; elsewhere nothing."""
    uid = os.getuid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # (after the name: state, ppid, pgrp, session)
            if int(fields[3]) != sid or os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            os.kill(int(entry), signal.SIGKILL)
        except (OSError, IndexError, ValueError):  # (gone meanwhile)
            continue


def loopback_only_prefix() -> list[str]:
    """``unshare`` argv that runs a command with only loopback up, or [] if not allowed."""
    global _netns
    if _netns is None:
        _netns = []
        unshare, ip = shutil.which("unshare"), shutil.which("ip")
        if unshare and ip:
            flag = "-n" if os.geteuid() == 0 else "-rn"
            argv = [unshare, flag, "sh", "-c", f'{ip} link set lo up && exec "$0" "$@"']
            try:
                ok = subprocess.run([*argv, "true"], capture_output=True, timeout=10)
                if ok.returncode == 0:
                    _netns = argv
            except (OSError, subprocess.TimeoutExpired):
                pass
    return _netns


def run_json(argv: Sequence[str], what: str, timeout: float,
             env: dict[str, str] | None = None,
             cleanup: Callable[[int], object] | None = None) -> dict[str, Any]:
    """Run ``argv`` to completion and return the last JSON object it printed.

    PeerUnavailable (with the tail of its stderr) if it fails, prints no JSON, or takes
    longer than ``timeout`` seconds. ``cleanup(pid)``: called with the child's pid once
    it and its session are gone, however the run ended (a Ctrl-C too).
    """
    proc = spawn(argv, env=env, new_session=True)
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise PeerUnavailable(f"{what} did not finish within {timeout:.0f} s") from exc
    finally:
        proc.kill() if proc.poll() is None else None
        reap(proc)
        _kill_group(proc.pid)
        _kill_session(proc.pid)
        if cleanup is not None:
            cleanup(proc.pid)
    tail = err.decode(errors="replace").strip()[-600:]
    if proc.returncode != 0:
        raise PeerUnavailable(f"{what} failed (exit {proc.returncode}): {tail}")
    for line in reversed(out.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise PeerUnavailable(f"{what} printed no result: {tail}")
