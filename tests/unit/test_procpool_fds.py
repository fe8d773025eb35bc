"""A replica's process pool that broke lets its descriptors go once it is done: its
queues' pipes (and their locks', pipes too: worker/pipelocks.py) are closed as its last
reference goes, not left to a full collection of the garbage. The broken pool's
exception (the call's future's) held, by its traceback, the frame of the call that
met it, which held the future: a cycle, through which every broken pool, 21
descriptors each, stayed open until the collector next looked at old objects."""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import pytest

from polybus.usernames import import_name
from polybus.worker.procpool import ProcessPool
from polybus.worker.replies import PoolDied

SERVER = ("import os\nimport signal\n\n\ndef f(x):\n    return x\n\n\n"
          "def die(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
HANG_GUARD_S = 30.0  # (a bound on a wait that never ends without the fix, not a speed)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_pool_that_broke_lets_its_descriptors_go_once_done(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    collecting = gc.isenabled()
    gc.disable()  # (what a cycle holds stays held: reference counts alone free a pool)
    pp = ProcessPool(2, tmp_path / "server.py", import_name("server"), "server-0")
    try:
        f, die = pp.wrap("f"), pp.wrap("die", idempotent=False)
        assert f(1) == 1
        base = _fds()
        for _ in range(3):
            with pytest.raises(PoolDied):
                die(0)
            assert f(2) == 2  # (a new pool, as many descriptors as the old)
        deadline = time.monotonic() + HANG_GUARD_S
        while _fds() > base and time.monotonic() < deadline:
            time.sleep(0.05)  # (each old pool goes once its own threads have ended)
        assert _fds() <= base, f"{_fds() - base} descriptors more than with one pool"
    finally:
        pp.close(grace=0.0)
        if collecting:
            gc.enable()


HALF_ANSWER = """
import os, signal, struct
from multiprocessing import connection

_real = connection.Connection._send_bytes


def _half_then_killed(self, buf):
    if len(buf) > 1_000_000:  # (the answer: its length and half of it sent, then killed)
        self._send(struct.pack("!i", len(buf)))
        self._send(memoryview(buf)[: len(buf) // 2].tobytes())
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(self, buf)


connection.Connection._send_bytes = _half_then_killed


def big(n):
    return b"x" * n


def f(x):
    return x
"""


def test_a_child_killed_halfway_through_its_answer_leaves_no_thread_reading_it(
        tmp_path: Path) -> None:
    """The executor's thread reads the rest of that answer: no end of file came, as this
    process held the answers' pipe's writing end too, so it read for ever (the call
    failed only once `_watch` gave up waiting for it, and it kept the pool, its
    descriptors and its feeder thread, for good)."""
    (tmp_path / "server.py").write_text(HALF_ANSWER)
    pp = ProcessPool(2, tmp_path / "server.py", import_name("server"), "server-0")
    try:
        old = pp._pool
        with pytest.raises(PoolDied, match=r"killed by signal 9"):  # (its news, not
            pp.wrap("big", idempotent=False)(2_000_000)  # the answer's end of file)
        assert old.manager is not None
        old.manager.join(HANG_GUARD_S)
        assert not old.manager.is_alive()
        assert pp.wrap("f")(3) == 3
    finally:
        pp.close(grace=0.0)
