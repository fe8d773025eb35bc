"""The client's liveness decision (client/liveness.py): pure, no sockets, no clocks."""

from __future__ import annotations

from polybus.client.liveness import Liveness, decide

HB = 1.0


def test_decide_pings_the_silent_and_buries_the_long_silent() -> None:
    watched = {
        "fresh": (9.5, None),        # heard half a heartbeat ago
        "quiet": (8.9, None),        # silent a heartbeat: ping
        "pinged": (8.0, 9.6),        # pinged 0.4 s ago: not again yet
        "repinged": (8.0, 8.9),      # pinged over a heartbeat ago: again
        "old-ping": (8.5, 8.0),      # heard after its last ping: ping anew
        "gone": (7.0, 9.0),          # silent three heartbeats: dead
    }
    ping, dead = decide(watched, 10.0, HB)
    assert sorted(ping) == ["old-ping", "quiet", "repinged"]
    assert dead == ["gone"]
    assert decide({}, 10.0, HB) == ([], [])
    assert decide({"x": (0.0, None)}, 10.0, HB, misses=20) == (["x"], [])


def test_a_link_that_answers_pings_never_dies() -> None:
    live: Liveness[str] = Liveness(HB)
    received = 0
    for step in range(40):  # a 20 s call; every ping gets a pong within the interval
        now = step * 0.5
        ping, dead = live.check([("a", received, True)], now)
        assert dead == []
        if ping:
            received += 32  # the Pong's bytes, seen at the next check


def test_a_cut_off_link_dies_within_four_heartbeats_and_is_pinged_first() -> None:
    live: Liveness[str] = Liveness(HB)
    pings, died = [], None
    for step in range(20):
        now = 100.0 + step * 0.5
        ping, dead = live.check([("cut", 500, True), ("ok", 1000 + step, True)], now)
        pings += [now for k in ping if k == "cut"]
        assert "ok" not in ping and "ok" not in dead
        if dead:
            assert dead == ["cut"]
            died = now
            break
    assert died is not None and died - 100.0 <= 4 * HB
    assert died - 100.0 >= 3 * HB           # never early: three heartbeats of silence
    assert len(pings) >= 2 and pings[0] - 100.0 >= HB


def test_idle_links_are_not_watched_and_busy_ones_start_fresh() -> None:
    live: Liveness[str] = Liveness(HB)
    assert live.check([("a", 0, False)], 0.0) == ([], [])
    # idle for a long time, then given calls: silence counts from the first busy check
    assert live.check([("a", 0, True)], 50.0) == ([], [])
    assert live.check([("a", 0, True)], 50.9) == ([], [])
    assert live.check([("a", 0, True)], 51.0) == (["a"], [])
    # answered everything: no longer watched; busy again later starts over
    assert live.check([("a", 0, False)], 60.0) == ([], [])
    assert live.check([("a", 0, True)], 70.0) == ([], [])
    assert not live.due(70.4) and live.due(70.5)
