"""mpi4py peer programs: a tiny run of each under mpiexec gives positive finite figures
and leaves no process behind. Skipped with the reason when mpi4py cannot run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.bench.peers import mpi

from .peer_checks import leaves_nothing, need, positive

pytestmark = pytest.mark.peers
SORT_SERVER = Path(__file__).resolve().parents[2] / "examples" / "sort" / "server.py"


@pytest.fixture(autouse=True)
def _mpi() -> None:
    need("mpi4py")


def test_latency_and_bandwidth() -> None:
    with leaves_nothing():
        rtt = mpi.rtt_us([0, 1000], 2, [50, 50], "split")
        bw = mpi.bandwidth_gbps([1_000_000], 2, "split")
    assert set(rtt) == {0, 1000} and set(bw) == {1_000_000}
    positive([*rtt.values(), *bw.values()])


def test_demand_throughput() -> None:
    with leaves_nothing():
        positive([mpi.calls_per_s(200, 2, 2)])


def test_sort_matmul_ep_answer_correctly() -> None:
    # launch() raises PeerUnavailable if rank 0 found a wrong answer
    with leaves_nothing():
        warm = mpi.sort_seconds(300, "quicksort", 2, 2, SORT_SERVER, warmup=1)
        assert warm.n == 2  # the untimed warm-up sort is not among the repetitions
        positive([mpi.sort_seconds(300, "insertion", 2, 1, SORT_SERVER), warm,
                  mpi.matmul_seconds(20, 2, False, 1), mpi.matmul_seconds(20, 2, True, 1),
                  mpi.ep_seconds(64, 16, 2, 1)])


def test_launch_runs_loopback_only() -> None:
    info = mpi.describe()
    assert info["btl"] == "self,sm"
    assert "loopback" in info["network"] or "shared memory" in info["network"]


def test_matmul_and_ep_over_loopback_tcp() -> None:
    # the like-for-like peer of polybus's tcp rows: Open MPI's TCP transport on loopback,
    # run only inside the private namespace (skipped with that reason where not permitted)
    from polybus.bench.peers import PeerUnavailable
    from polybus.bench.peers._driver import loopback_only_prefix

    if not loopback_only_prefix():
        with pytest.raises(PeerUnavailable, match="namespace"):
            mpi.ep_seconds(64, 16, 2, 1, transport="tcp")
        return
    with leaves_nothing():
        positive([mpi.matmul_seconds(20, 2, False, 1, transport="tcp"),
                  mpi.ep_seconds(64, 16, 2, 1, transport="tcp")])
    assert "btl_tcp_if_include lo" in mpi.describe()["btl (transport=tcp)"]


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="expected one of"):
        mpi.ep_seconds(64, 16, 2, 1, transport="udp")
