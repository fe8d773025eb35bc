"""Peers give positive finite figures on tiny runs and leave no child process behind.

No timing is asserted: these machines are shared and noisy (BENCHMARKS.md).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from conftest import gone  # tests/conftest.py
from polybus.bench.peers import PeerUnavailable, cpingpong, pools, rawsocket
from polybus.bench.peers._proc import spawned_pids
from polybus.bench.placement import cpu_sets, pinned_self
from polybus.bench.report import SYSTEMS

if TYPE_CHECKING:
    from conftest import QuickBenchmarks  # tests/conftest.py


@pytest.fixture
def new_children() -> Iterator[list[int]]:
    """PIDs the peers start during the test; afterwards each must be gone."""
    before = set(spawned_pids())
    started: list[int] = []
    yield started
    started.extend(p for p in spawned_pids() if p not in before)
    left = [p for p in started if not gone(p)]
    assert not left, f"child processes left behind: {left}"


def test_raw_socket_tcp_and_unix(new_children: list[int]) -> None:
    families: list[rawsocket.Family] = ["tcp"]
    if hasattr(socket, "AF_UNIX"):
        families.append("unix")
    for family in families:
        rtt = rawsocket.rtt_us([0, 1000], reps=2, budget=20, family=family, placement="free")
        assert set(rtt) == {0, 1000}
        assert all(s.is_finite_positive() and s.n == 2 for s in rtt.values())
        bw = rawsocket.bandwidth_gbps([200_000], reps=2, family=family, placement="free")
        assert bw[200_000].is_finite_positive()
    assert len(spawned_pids()) >= 2 * len(families)


def test_raw_socket_that_polls_before_blocking(new_children: list[int]) -> None:
    with rawsocket.RawSocketPeer("tcp", "free", poll_s=1e-4) as peer:
        # Echoes of every size come back whole, polled for or blocked for.
        for size in (0, 1000, 300_000):
            st = peer.rtt_us(size, reps=2, iters=5)
            assert st.is_finite_positive() and st.n == 2
        assert peer.pid in spawned_pids()


def test_raw_socket_server_reaped_on_error(new_children: list[int]) -> None:
    with pytest.raises(ZeroDivisionError), rawsocket.RawSocketPeer("tcp", "free") as peer:
        assert peer.pid in spawned_pids()
        raise ZeroDivisionError


def test_c_peer(new_children: list[int]) -> None:
    try:
        cpingpong.ensure_binary()
    except PeerUnavailable as exc:
        pytest.skip(f"C peer unavailable: {exc}")
    n0 = len(spawned_pids())
    assert cpingpong.rtt_us(100, reps=2, iters=20, placement="free").is_finite_positive()
    assert cpingpong.bandwidth_gbps(200_000, reps=2, placement="free").is_finite_positive()
    assert len(spawned_pids()) - n0 == 4  # a server and a client each time


def test_c_peer_without_compiler_is_skipped_with_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cpingpong.shutil, "which", lambda _name: None)
    with pytest.raises(PeerUnavailable, match="cc"):
        cpingpong.ensure_binary()


def test_pools_and_memcpy() -> None:
    assert pools.process_pool_calls_per_s(1, calls=40, reps=2).is_finite_positive()
    assert pools.process_pool_calls_per_s(100, calls=400, reps=2).is_finite_positive()
    assert pools.mp_pool_calls_per_s(1, calls=40, reps=2).is_finite_positive()
    assert pools.memcpy_gbps(100_000, reps=2).is_finite_positive()
    assert multiprocessing.active_children() == []


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_pinning_is_restored() -> None:
    before = os.sched_getaffinity(0)
    sets = cpu_sets("same")
    assert sets is not None
    with pinned_self(sets[0]):
        assert os.sched_getaffinity(0) == sets[0]
    assert os.sched_getaffinity(0) == before
    assert cpu_sets("free") is None


def test_quick_latency_bench_end_to_end(new_children: list[int],
                                        quick_bench: QuickBenchmarks) -> None:
    run = quick_bench("latency")  # the session's one run (tests/conftest.py)
    assert not run.left_behind, f"child processes left behind: {run.left_behind}"
    res = run.result
    systems = {r.system for r in res.rows}
    assert "raw_socket" in systems and systems <= set(SYSTEMS)  # (BENCHMARKS.md's names)
    assert {str(r.config.get("wait")) for r in res.rows if r.system == "raw_socket"} == {
        "block", "poll"}
    assert any(r.name.startswith("polybus/raw_socket wait=poll") for r in res.ratios)
    assert "c_socket" in systems or "c_socket" in res.skipped
    assert all(r.median > 0 and r.min <= r.median <= r.max for r in res.rows)
    assert any(r.name.startswith("raw_socket/c_socket") for r in res.ratios) or res.skipped


def test_peer_rows_go_on_without_mpi4py(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench matmul --quick ran 20 s, then ended "polybus bench: error: not installed
    # (pip install mpi4py)" with no output: mpi.describe() was called unguarded.
    from polybus.bench import peer_rows
    from polybus.bench.peers import mpi
    from polybus.bench.progress import NullProgress
    from polybus.bench.report import BenchResult

    def missing(*_: object, **__: object) -> None:
        raise PeerUnavailable("not installed (pip install mpi4py)")

    for name in ("describe", "matmul_seconds", "ep_times", "mpiexec"):
        monkeypatch.setattr(mpi, name, missing)
    result = BenchResult("matmul")
    peer_rows.matmul(result, [10], [1], lambda n: 1, NullProgress(), lambda n: 1)
    assert result.skipped["mpi4py"] == "not installed (pip install mpi4py)"
    assert not result.rows and "mpi4py" not in result.params.get("peers", {})
    result = BenchResult("ep")
    assert peer_rows.ep_times(result, 8, 4, 1, 1, "sm") is None
    peer_rows.ep_rows(result, {})
    assert "mpi4py" in result.skipped and not result.rows


def test_matmul_pool_sends_each_repetitions_b_to_every_worker() -> None:
    """The stateful process_pool row hands each worker the repetition's fresh B inside
    the timed part; a worker left with an earlier B would make a wrong product, which
    pool_seconds raises on. The untimed row keeps one B from the initializer."""
    from polybus.bench.peers import matmul_pool

    for b_untimed in (False, True):
        st = matmul_pool.pool_seconds(40, 2, True, reps=3, warmup=1, b_untimed=b_untimed)
        assert st.is_finite_positive()
    assert multiprocessing.active_children() == []


def test_matmul_pool_fails_loudly_when_b_misses_a_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If B reached fewer workers than the pool has, the row fails, not times a wrong
    program (here the workers' pids are all made to look the same)."""
    from polybus.bench.peers import matmul_pool

    monkeypatch.setattr(matmul_pool, "_take_b", _same_pid)
    with pytest.raises(RuntimeError, match="B reached 1 of 2 workers"):
        matmul_pool.pool_seconds(20, 2, True, reps=1, warmup=0)
    assert multiprocessing.active_children() == []


def _same_pid(b: object) -> int:
    from polybus.bench.peers import matmul_pool

    matmul_pool._B = b
    matmul_pool._BARRIER.wait(matmul_pool.BARRIER_S)
    return 1


def test_ray_and_dask_are_compared_with_polybus_split_and_like_for_like() -> None:
    """Ray and Dask pin nothing: their ratios are against polybus's row of record
    (cpus=split) and against polybus with nothing pinned either (cpus=free)."""
    from polybus.bench import peer_rows
    from polybus.bench.report import BenchResult, Row
    from polybus.bench.stats import summarize

    lat = BenchResult("latency", {})
    for cpus, us in (("split", 1000.0), ("same", 500.0), ("free", 300.0)):
        lat.add(Row.of("polybus", {"transport": "tcp", "cpus": cpus}, 1e6, "rtt_us",
                       summarize([us])))
    lat.add(Row.of("ray", {"num_cpus": 2, "cpus": "free"}, 1e6, "rtt_us", summarize([3000.0])))
    peer_rows.latency_ratios(lat)
    got = {r.name: r.value for r in lat.ratios if r.name.startswith("ray/")}
    assert got == {"ray/polybus rtt at 1000000 B (ray cpus=free, polybus cpus=split)": 3.0,
                   "ray/polybus rtt at 1000000 B (ray cpus=free, polybus cpus=free)": 10.0}

    bw = BenchResult("bandwidth", {})
    for cpus, gbps in (("split", 1.0), ("same", 3.0), ("free", 2.0)):
        bw.add(Row.of("polybus", {"transport": "tcp", "cpus": cpus}, 1e6, "gbps",
                      summarize([gbps])))
    bw.add(Row.of("dask", {"cpus": "free"}, 1e6, "gbps", summarize([0.5])))
    peer_rows.bandwidth_ratios(bw)
    got = {r.name: r.value for r in bw.ratios if r.name.startswith("polybus/dask")}
    assert sorted(got.values()) == [2.0, 4.0]
    assert all("cpus=same" not in name for name in got)
