"""The suite keeps MPI's shared-memory files in a directory of its session's own
(tests/conftest.py, `_mpi_files_apart`), removed when the session ends; a session killed
(a timeout's SIGTERM) left its empty directory in /dev/shm, one a killed run. The next
session removes those whose process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import stale_mpi_dirs_removed


def test_a_killed_session_s_directory_goes_and_a_live_one_s_stays(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = tmp_path / f"suite-mpi-{int(ended.stdout)}-abc"  # (its process has ended)
    live = tmp_path / f"suite-mpi-{os.getpid()}-def"
    other = tmp_path / "suite-mpi-x"  # (not of this form: left as it is)
    for d in (dead, live, other):
        d.mkdir()
    (dead / "sm_segment.1").write_bytes(b"")
    assert stale_mpi_dirs_removed(str(tmp_path)) == [dead.name]
    assert not dead.exists() and live.exists() and other.exists()
