"""latency: every system makes untimed round trips before its first timed size (a
cluster just started made polybus's first size, 0 B, twice as slow as 1000 B). Order
only, with fakes: no clock is judged."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from polybus.bench import b_latency
from polybus.bench.peers import rawsocket
from polybus.bench.progress import NullProgress
from polybus.bench.report import BenchResult
from polybus.bench.stats import Stat


def test_warmed_sizes_warms_before_the_first_size() -> None:
    calls: list[Any] = []
    got = b_latency.warmed_sizes(lambda k: calls.append(("warm", k)),
                                 lambda size: calls.append(("measure", size)) or size,
                                 [0, 1000], seconds=0.0)
    assert calls == [("warm", 50), ("measure", 0), ("measure", 1000)]
    assert got == {0: 0, 1000: 1000}


class _FakePeer:
    calls: ClassVar[list[tuple[str, int, int, int]]] = []

    def __init__(self, *args: object) -> None:
        pass

    def __enter__(self) -> _FakePeer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def rtt_us(self, size: int, reps: int = 5, iters: int = 200, warmup: int = 1) -> Stat:
        self.calls.append(("rtt", size, reps, iters))
        return Stat(1.0, 1.0, 1.0, reps)


def test_each_raw_socket_is_warmed_before_its_first_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rawsocket, "RawSocketPeer", _FakePeer)
    monkeypatch.setattr(b_latency, "WARMUP_S", 0.0)
    monkeypatch.setattr(b_latency, "QUICK_WARMUP_S", 0.0)
    monkeypatch.setattr(b_latency.cpingpong, "rtt_us", lambda *a: Stat(1.0, 1.0, 1.0, 3))
    _FakePeer.calls = []
    result = BenchResult("latency")
    b_latency.peer_rows(result, True, NullProgress())
    p = b_latency.plan(True)
    timed = [("rtt", s, p.reps, p.iters(s)) for s in p.sizes]
    per_peer = [("rtt", p.sizes[0], 1, 50), *timed]  # one warm batch (0 s), then the sizes
    assert _FakePeer.calls == per_peer * len(b_latency._RAW)


def test_the_polybus_client_warms_before_its_first_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from polybus.bench.programs import bench_client

    sent: list[bytes] = []
    monkeypatch.setattr(bench_client, "echo", lambda payload: sent.append(payload))
    monkeypatch.setattr(bench_client, "_family", lambda: "tcp")
    out = bench_client.latency([1, 2], 1, [3, 3], 0.0)
    # one untimed empty echo at least, then each size: an untimed repetition and a timed one
    assert sent == [b"", *[b"\x07"] * 6, *[b"\x07" * 2] * 6]
    assert len(out["rtt_us"]) == 2


@pytest.mark.parametrize("quick", [True, False])
def test_the_polybus_rows_ask_the_client_for_the_warm_up(
        quick: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(b_latency, "call_path_rows", lambda entry, args, *rest: seen.append(
        (entry, args)) or [])
    b_latency.polybus_rows(quick)
    (entry, args), = seen
    # (--quick warms for less long, but warms: it proves the run works)
    want = b_latency.QUICK_WARMUP_S if quick else b_latency.WARMUP_S
    assert entry == "latency" and args[3] == want > 0
