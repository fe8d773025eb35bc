"""A Ctrl-C while a peer runs under mpiexec: its group got SIGKILL, so prterun could not
remove its session directory (``/tmp/ompi.PID`` was left), and the ranks, each in a
process group of its own, lived on. The child's session is killed too, and the session
directory of the launcher we started removed: only that one, only if it is ours. (The
"launcher" here is a small Python child that does what prterun does: the directory, and
a child in a group of its own.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from polybus.bench.peers import _driver, mpi

LAUNCHER = """
import os, pathlib, subprocess, sys, time
tmp = pathlib.Path(sys.argv[1])
(tmp / f"ompi.{os.getpid()}" / "0" / "0").mkdir(parents=True)
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                        process_group=0)
(tmp / "rank.new").write_text(str(rank.pid))
os.replace(tmp / "rank.new", tmp / "rank")  # (whole when seen: the test reads it then)
time.sleep(120)
"""


def _gone(pid: int, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")
def test_a_ctrl_c_during_a_peer_ends_its_ranks_and_removes_its_session_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    other = tmp_path / "ompi.1"  # (another launcher's: not ours to remove)
    other.mkdir()
    spawn = _driver.spawn

    def spawn_then_interrupt(*a: object, **k: object) -> subprocess.Popen[bytes]:
        proc = spawn(*a, **k)  # type: ignore[arg-type]

        def communicate(timeout: float | None = None) -> tuple[bytes, bytes]:
            end = time.monotonic() + 30
            while not (tmp_path / "rank").exists() and time.monotonic() < end:
                time.sleep(0.02)
            raise KeyboardInterrupt  # (Ctrl-C, the launcher and its rank running)
        proc.communicate = communicate  # type: ignore[method-assign,assignment]
        return proc

    monkeypatch.setattr(_driver, "spawn", spawn_then_interrupt)
    rank = None
    try:
        with pytest.raises(KeyboardInterrupt):
            _driver.run_json([sys.executable, "-c", LAUNCHER, str(tmp_path)], "fake", 60,
                             cleanup=mpi.remove_session_dir)
        rank = int((tmp_path / "rank").read_text())
        assert _gone(rank), "the rank outlived its launcher"
        assert [p.name for p in tmp_path.glob("ompi.*")] == ["ompi.1"]
    finally:
        if rank is not None and not _gone(rank, 0):
            os.kill(rank, 9)


def test_only_our_launcher_s_own_directory_is_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = tmp_path / "keep"
    (target / "x").mkdir(parents=True)
    (tmp_path / "ompi.42").symlink_to(target)  # a link: not followed, not removed
    mpi.remove_session_dir(42)
    assert (target / "x").is_dir() and (tmp_path / "ompi.42").is_symlink()
    mpi.remove_session_dir(43)  # (none: nothing)
    (tmp_path / "ompi.44" / "0").mkdir(parents=True)
    if os.geteuid() == 0:  # another user's: kept
        os.chown(tmp_path / "ompi.44", 65534, 65534)
        mpi.remove_session_dir(44)
        assert (tmp_path / "ompi.44").is_dir()
        os.chown(tmp_path / "ompi.44", 0, 0)
    mpi.remove_session_dir(44)
    assert not (tmp_path / "ompi.44").exists()
