"""Balance policies: pure choices over a view of the replicas."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from polybus.client.policies.balance import (
    LeastLoaded,
    RoundRobin,
    WeightedRoundRobin,
    auto_window,
    demand_pick,
)


def test_round_robin_in_turn() -> None:
    rr = RoundRobin()
    assert [rr.pick([True] * 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_skips_dead() -> None:
    rr = RoundRobin()
    alive = [True, False, True]
    assert [rr.pick(alive) for _ in range(4)] == [0, 2, 0, 2]
    assert rr.pick([False, False, False]) is None
    assert rr.pick([]) is None


class _Loaded:
    def __init__(self, load: int, dead: bool = False) -> None:
        self.load, self.dead = load, dead
        self.abandoned: set[int] = set()


def test_least_loaded_takes_the_idle_replica_and_rotates_on_ties() -> None:
    links = [_Loaded(0), _Loaded(0), _Loaded(0)]
    p = LeastLoaded(links)
    assert [p.pick_open(links, ()) for _ in range(4)] == [0, 1, 2, 0]  # ties: in turn
    links[1].load = 3  # a long call there: passed over while another has fewer
    links[2].load = 1
    assert [p.pick_open(links, ()) for _ in range(3)] == [0, 0, 0]
    links[0].load = 2
    assert p.pick_open(links, ()) == 2
    assert p.pick([True, True, False]) == 0  # (the batcher's form: alive flags)


def test_least_loaded_passes_over_a_replica_running_a_call_given_up_on() -> None:
    """As the rotation does: a call sent there waits behind the call the client gave
    up on, however few calls it has (a review found such calls timing out)."""
    links = [_Loaded(1), _Loaded(2)]
    links[0].abandoned.add(7)
    p = LeastLoaded(links)
    assert p.pick_open(links, ()) == 1
    links[1].abandoned.add(8)  # both: the least loaded of them
    assert p.pick_open(links, ()) == 0


def test_least_loaded_skips_dead_and_isolated_replicas() -> None:
    links = [_Loaded(5), _Loaded(0, dead=True), _Loaded(0)]
    p = LeastLoaded(links)
    assert p.pick_open(links, {2}) == 0  # the only open one, however loaded
    assert p.pick_open(links, ()) == 2
    for lk in links:
        lk.dead = True
    assert p.pick_open(links, ()) is None and p.pick([False] * 3) is None


def test_weighted_proportions_over_each_window() -> None:
    w = [1, 2, 4]
    p = WeightedRoundRobin(w)
    picks = [p.pick([True] * 3) for _ in range(7 * 10)]
    for k in range(10):
        assert Counter(picks[7 * k:7 * k + 7]) == {0: 1, 1: 2, 2: 4}


def test_weighted_is_smooth_not_in_runs() -> None:
    p = WeightedRoundRobin([1, 1, 5])
    picks = [p.pick([True] * 3) for _ in range(7)]
    assert picks.count(2) == 5
    # nginx smooth weighting: the heavy one never takes more than 3 in a row here
    runs = max(len(r) for r in "".join(map(str, picks)).replace("0", " ").replace("1", " ").split())
    assert runs <= 3


def test_weighted_skips_dead_and_zero_weight() -> None:
    p = WeightedRoundRobin([1, 0, 3])
    picks = [p.pick([True, True, False]) for _ in range(5)]
    assert picks == [0] * 5
    assert p.pick([False, True, False]) is None


@pytest.mark.parametrize("bad", [[], [0, 0], [1, -1]])
def test_weighted_refuses_bad_weights(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        WeightedRoundRobin(bad)


def test_demand_pick_fewest_outstanding_with_room() -> None:
    assert demand_pick([2, 1, 1], [3, 3, 3], [True] * 3) == 1      # first on a tie
    assert demand_pick([0, 1, 1], [3, 3, 3], [False, True, True]) == 1
    assert demand_pick([3, 3, 2], [3, 3, 3], [True] * 3) == 2
    assert demand_pick([3, 3, 3], [3, 3, 3], [True] * 3) is None   # every window full
    assert demand_pick([0, 5], [1, 8], [True, True]) == 0


def test_auto_window() -> None:
    assert auto_window(rtt_s=100e-6, service_s=100e-6) == 2
    assert auto_window(rtt_s=1e-3, service_s=1e-4) == 11
    assert auto_window(rtt_s=1e-6, service_s=1.0) == 1   # service dwarfs the round trip
    assert auto_window(rtt_s=1.0, service_s=1e-9) == 64   # capped
    assert auto_window(rtt_s=1.0, service_s=0.0) == 64
    assert auto_window(rtt_s=0.0, service_s=1.0, lo=3) == 3


def test_demand_pick_weighs_every_interfaces_calls() -> None:
    # Both have room for this interface; replica 0 runs another interface's call.
    assert demand_pick([0, 0], [1, 1], [True, True], load=[1, 0]) == 1
    # The load breaks no window: a full window stays full whatever the load elsewhere.
    assert demand_pick([1, 0], [1, 1], [True, True], load=[1, 5]) == 1
    # Equal load: this interface's own calls, then the first in order.
    assert demand_pick([1, 0], [2, 2], [True, True], load=[2, 2]) == 1
    assert demand_pick([0, 0], [1, 1], [True, True], load=[0, 0]) == 0


class _Link:
    def __init__(self, dead: bool = False, abandoned: tuple[int, ...] = ()) -> None:
        self.dead = dead
        self.abandoned = set(abandoned)


def test_round_robin_passes_over_a_replica_running_an_abandoned_call() -> None:
    rr = RoundRobin()
    links = [_Link(abandoned=(9,)), _Link(), _Link()]
    assert [rr.pick_open(links, ()) for _ in range(4)] == [1, 2, 1, 2]
    # When every open replica has one, the rotation goes on over them all.
    links = [_Link(abandoned=(1,)), _Link(dead=True), _Link(abandoned=(2,))]
    assert [rr.pick_open(links, ()) for _ in range(3)] == [0, 2, 0]


class _Reactor:
    """Answers read at a poll: ``frees``'s calls are done then. Sends are recorded."""

    def __init__(self, frees: _Loaded) -> None:
        self.frees, self.polled, self.sent = frees, [], []  # type: list[bool], list[str]
        self.links: list[Any] = []

    def poll(self, batches: bool = True) -> None:
        self.polled.append(batches)
        self.frees.load = 0

    def send(self, link: Any, msg: Any) -> None:  # (the positional call's own way)
        self.sent.append(link.name)


@pytest.mark.parametrize("form", ["positional", "keyword", "list"])
def test_least_reads_the_answers_that_came_before_it_picks(form: str) -> None:
    """With no replica free of calls, a call under "least" reads the answers that have
    come first (a program that does not wait reads none), whatever its arguments (calls
    with keywords or containers took a path that did not), and reads only: another
    binding's open batch is not closed for it (batches=False)."""
    from polybus.client.dispatch import Dispatcher
    from polybus.config.model import CallStyle

    busy, done = _Loaded(1), _Loaded(1)
    for lk, name in ((busy, "busy"), (done, "done")):
        lk.name, lk.outstanding = name, {}  # type: ignore[attr-defined]
    reactor = _Reactor(done)
    d = Dispatcher("f", reactor, [busy, done], CallStyle("async"),  # type: ignore[arg-type]
                   least=True)
    sent = reactor.sent
    d._send = lambda rec, link, hold=False: sent.append(link.name)  # type: ignore[method-assign]
    args, kwargs = {"positional": ((1,), {}), "keyword": ((), {"x": 1}),
                    "list": (([1, 2],), {})}[form]
    d.call_async(args, kwargs)
    assert sent == ["done"] and reactor.polled == [False]
    d.reads_fresh = False  # (serve: its loop reads every answer as it comes)
    done.load = 1
    d.call_async(args, kwargs)
    assert reactor.polled == [False]


def test_weighted_rotation_never_indexes_past_its_shares() -> None:
    """More replicas than shares (a session given more than its replication, which no
    longer happens: client/choosing.py) failed every call with an IndexError; a replica
    past the last share gets none."""
    w = WeightedRoundRobin([1.0, 3.0])
    picks = [w.pick([True, True, True]) for _ in range(8)]
    assert picks.count(0) == 2 and picks.count(1) == 6
    assert w.pick([False, False, True]) is None


def test_each_policy_starts_at_the_clients_turn() -> None:
    """A client of a registry that others share starts at the replica its turn gives
    (the name server's round robin), then rotates as ever; a ratio is left alone."""
    assert [RoundRobin(start=1).pick([True] * 3) for _ in range(1)] == [1]
    rr = RoundRobin(start=5)  # (any count: taken modulo the replicas)
    assert [rr.pick([True] * 3) for _ in range(4)] == [2, 0, 1, 2]
    rr = RoundRobin(start=1)
    assert rr.pick([True, False, True]) == 2  # (a dead one passed over, as ever)
    links = [_Loaded(0), _Loaded(0), _Loaded(0)]
    assert LeastLoaded(links, start=2).pick_open(links, ()) == 2  # ties: from its turn
    links[2].load = 1
    assert LeastLoaded(links, start=2).pick_open(links, ()) == 0  # load still first
    assert demand_pick([0, 0, 0], [1, 1, 1], [True] * 3, start=1) == 1
    assert demand_pick([0, 0, 0], [1, 1, 1], [True, False, True], start=1) == 2
    assert demand_pick([0, 1, 0], [2, 2, 2], [True] * 3, start=4) == 2  # (fewest first)
    assert demand_pick([1, 1, 1], [1, 1, 1], [True] * 3, start=2) is None
    assert demand_pick([], [], [], start=3) is None
