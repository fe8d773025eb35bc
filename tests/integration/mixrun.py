"""Running one ``polybus`` command of the combination tests (stratmix.py and the
harnesses built on it): in a process group and a ``$TMPDIR`` of its own, bounded in
time, with what it left behind (processes, files) and the mix program's digest."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLYBUS = [sys.executable, "-m", "polybus"]


@dataclass
class Outcome:
    rc: int | None  # None: killed at the limit
    digest: str = ""
    entries: list[str] = field(default_factory=list)
    stderr: str = ""
    left: list[str] = field(default_factory=list)  # processes and files a run left
    seconds: float = 0.0


def _group(pgid: int) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # (a process ended meanwhile)
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] != "Z" and int(stat[2]) == pgid:
                pids.append(int(d.name))
    return pids


def run(args: list[str], limit: float = 10.0, sets: list[str] = (),  # type: ignore[assignment]
        stop_itself: bool = True, env_add: dict[str, str] | None = None,
        started: Callable[[subprocess.Popen[str]], None] | None = None) -> Outcome:
    """``polybus ARGS`` with ``--set``s, in a process group and a ``$TMPDIR`` of its own;
    killed (its group) past ``limit`` seconds. ``stop_itself``: a run is given
    ``--timeout`` a little under ``limit``, to say where it was; else, past the limit,
    every process of the group is asked for its stacks (SIGUSR1: the workers write them
    to their logs, which are added to its stderr). ``env_add`` is added to its
    environment; ``started(process)`` is called once it started (chaosmix.py's killer)."""
    tmp = Path(tempfile.mkdtemp(prefix="smx-", dir="/tmp"))
    js = tmp / "run.json"
    cmd = [*POLYBUS, *args]
    if args[0] == "run":
        cmd += ["--quiet", "--json", str(js)]
        if stop_itself:
            cmd += ["--timeout", f"{max(limit - 2.5, 1):g}s"]
    for s in sets:
        cmd += ["--set", s]
    env = {k: v for k, v in os.environ.items() if k != "POLYBUS_TOKEN"}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(tmp)
    env.update(env_add or {})
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        if started:
            started(p)
        _, err = p.communicate(timeout=limit)
        rc: int | None = p.returncode
    except subprocess.TimeoutExpired:
        if not stop_itself:
            for q in _group(p.pid):
                os.kill(q, signal.SIGUSR1)
            time.sleep(2)
            logs = "".join(f"--- {f.name}\n{f.read_text(errors='replace')}" for f in tmp.rglob("*.log"))
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            return Outcome(None, stderr=err + logs, seconds=time.monotonic() - t0)
        p.send_signal(signal.SIGUSR1)  # polybus prints every thread's stack
        try:
            _, err = p.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
        rc = None
    except BaseException:  # (the test's own timeout, a Ctrl-C: the run's group goes too)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    out = Outcome(rc, stderr=err, seconds=time.monotonic() - t0)
    deadline = time.monotonic() + 5
    while (left := _group(p.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    out.left += [f"pid {q}" for q in left]
    for q in left:
        with contextlib.suppress(OSError):
            os.kill(q, signal.SIGKILL)
    if js.exists():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            res = json.loads(js.read_text())["result"]
            rounds = res if isinstance(res, list) else [res]  # (client.main's rounds)
            out.digest = "+".join(r["digest"] for r in rounds)
            out.entries = [e for r in rounds for e in r["entries"]]
        js.unlink()
    out.left += [str(x) for x in tmp.iterdir()]
    shutil.rmtree(tmp, ignore_errors=True)
    return out
