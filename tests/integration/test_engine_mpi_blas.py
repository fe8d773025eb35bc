"""Under a real mpiexec, each rank that serves a replica takes its share of its host's
CPUs for numpy's BLAS, as the local engine's workers do (engines/launchenv.py); a run
whose environment sets a BLAS variable is left as it set it. A trial found the ranks
with a thread per CPU each: a 600x600 product took 0.25-0.36 s over mpi against
0.07-0.12 s under the local engine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from polybus.engines.launchenv import BLAS_VARS
from polybus.testing.apps import write_one_call_app
from polybus.testing.engines import command, launch, mpi_unavailable

SERVER = """\
import os


def f(x):
    return [os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")]
"""

CLIENT = """\
from polybus import use

f = use("f")


def main():
    return [f(1), f(2)]
"""


@pytest.fixture(autouse=True)
def _need_mpi() -> None:
    if why := mpi_unavailable():
        pytest.skip(f"mpi engine: {why}")


def _run(tmp_path: Path) -> list[list[str | None]]:
    app = write_one_call_app(tmp_path, server_keys="replication = 2", server=SERVER,
                             client=CLIENT)
    status, out = launch(command("mpi", app, 2, tmp_path / "out.json"), tmp_path)
    assert status == 0, out
    result: list[list[str | None]] = json.loads((tmp_path / "out.json").read_text())["result"]
    return result


def test_each_serving_rank_takes_its_share_of_the_cpus(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for v in BLAS_VARS:
        monkeypatch.delenv(v, raising=False)
    share = str(max(1, len(os.sched_getaffinity(0)) // 3))  # (3 ranks on this host)
    assert _run(tmp_path) == [[share, share], [share, share]]


def test_a_blas_variable_the_run_sets_is_left_as_set(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for v in BLAS_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert _run(tmp_path) == [["3", None], ["3", None]]
