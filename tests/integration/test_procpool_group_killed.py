"""A worker with a process pool (``pool = "processes:2"``) whose whole process group is
SIGKILLed leaves nothing in /dev/shm: not while it serves, nor while its pool's children
still import the module. The pool's queues held named POSIX semaphores
(``/dev/shm/sem.mp-*``, multiprocessing's spawn context) until multiprocessing's resource
tracker unlinked them, and the tracker, in the same group, died with it: each such kill
left them for good.

Only what the worker's own processes mapped while alive is looked at afterwards (and
removed, should the test fail): another program's semaphores made meanwhile are not."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.conftest import Procs, read_line, rest_of, start_registry, wait_gone
from polybus.testing.proctree import descendants

_SERVER = """\
import multiprocessing, pathlib, time

if multiprocessing.parent_process() is not None and {slow_child}:
    pathlib.Path({mark!r}, str(multiprocessing.current_process().pid)).touch()
    time.sleep(60)


def f(x):
    return x
"""


def _mapped(pids: set[int]) -> set[str]:
    """The files of /dev/shm that ``pids`` map now (their semaphores, shared memory)."""
    out: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            out |= set(re.findall(r"/dev/shm/[^\s]+", Path(f"/proc/{pid}/maps").read_text()))
    return out


@pytest.fixture
def ours() -> Iterator[set[str]]:
    """Names in /dev/shm the test's own processes were seen to map: any still there at
    the end are removed (a failed run must not fill the machine either)."""
    seen: set[str] = set()
    try:
        yield seen
    finally:
        for name in seen:
            with contextlib.suppress(OSError):
                os.unlink(name)


@pytest.mark.parametrize("when", ["serving", "starting"])
def test_a_worker_whose_group_is_killed_leaves_nothing_in_dev_shm(
        procs: Procs, tmp_path: Path, ours: set[str], when: str) -> None:
    token = "group-killed-token-" + "g" * 20
    env = {"POLYBUS_TOKEN": token}
    addr, _ = start_registry(procs, env)
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "srv.py").write_text(_SERVER.format(slow_child=when == "starting",
                                                    mark=str(marks)))
    (tmp_path / "client.py").write_text("from polybus import use\n\nf = use('f')\n\n\n"
                                        "def main():\n    return f(1)\n")
    app = tmp_path / "app.toml"
    app.write_text('[modules.server]\nsource = "srv.py"\nreplication = 1\n'
                   'define.f.pool = "processes:2"\n\n'
                   '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
                   '[bind]\n"client.f" = "server.f"\n')
    w = procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                    "--name", "server-0", env=env, group=True)
    assert w.stderr is not None
    if when == "serving":
        read_line(w.stderr, "serving")
    else:  # (both children in their import, the pool not started yet)
        deadline = time.monotonic() + 20
        while len(list(marks.iterdir())) < 2:
            assert w.poll() is None and time.monotonic() < deadline, rest_of(w.stderr)
            time.sleep(0.02)
    tree = descendants(w.pid) | {w.pid}
    procs.watch(tree)
    assert len(tree) >= 3  # (the worker, its two children)
    ours |= _mapped(tree)
    os.killpg(w.pid, signal.SIGKILL)
    assert wait_gone(tree, timeout=10) == set()
    w.wait(timeout=10)
    left = sorted(n for n in ours if os.path.exists(n))
    assert left == [], left
