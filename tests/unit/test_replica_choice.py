"""Which registered replicas a session uses (client/choosing.py): the replication's
places, each its named replica or another by name; spares for those not reached."""

from __future__ import annotations

from typing import Any, cast

import pytest

from polybus.client.choosing import check_shares, choose, dial_places, places, replication_text
from polybus.errors import ConfigError, TransportError
from polybus.transport.channel import Channel
from polybus.wire.messages import Replica

PLACES = ["server-0", "server-1"]


def _reps(*names: str) -> list[Replica]:
    return [Replica(n, "server", f"tcp://127.0.0.1:{i + 1}", ["f"]) for i, n in enumerate(names)]


def _names(rs: list[Replica]) -> list[str]:
    return [r.name for r in rs]


@pytest.mark.parametrize(("registered", "chosen", "spares"), [
    # more than the replication: the configured names, in the configuration's order
    (("server-2", "server-1", "server-0"), PLACES, ["server-2"]),
    (("server-3", "server-0", "server-2", "server-1"), PLACES, ["server-2", "server-3"]),
    # a configured name not registered: its place taken by another, by name; the
    # configured one keeps its own place (and its load ratio share)
    (("zed", "server-1", "alpha"), ["alpha", "server-1"], ["zed"]),
    # as many: all, in places
    (("server-1", "server-0"), PLACES, []),
    # fewer (the run goes on with those found): as they were, in the configuration's order
    (("server-1",), ["server-1"], []),
    (("other",), ["other"], []),
])
def test_the_replication_places_are_filled_deterministically(
        registered: tuple[str, ...], chosen: list[str], spares: list[str]) -> None:
    got, left = choose(PLACES, _reps(*registered))
    assert (_names(got), _names(left)) == (chosen, spares)
    # the registry's order does not matter
    got2, left2 = choose(PLACES, _reps(*reversed(registered)))
    assert (_names(got2), _names(left2)) == (chosen, spares)


def test_named_places_and_none() -> None:
    got, left = choose(["b", "a"], _reps("c", "a", "b"))
    assert (_names(got), _names(left)) == (["b", "a"], ["c"])
    got, left = choose([], _reps("c", "a"))  # (no places: every one)
    assert (_names(got), _names(left)) == (["a", "c"], [])


class _Ch:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def _dialer(down: set[str], log: list[list[str]]) -> Any:
    def dial(rs: list[Replica]) -> list[Channel | TransportError]:
        log.append(_names(rs))
        return [TransportError(f"{r.name} down") if r.name in down
                else cast(Channel, _Ch(r.name)) for r in rs]
    return dial


def test_a_place_whose_replica_cannot_be_reached_takes_a_spare() -> None:
    chosen, spares = choose(PLACES, _reps("server-0", "server-1", "server-2", "server-3"))
    log: list[list[str]] = []
    made, failed = dial_places(chosen, spares, _dialer({"server-0", "server-2"}, log))
    assert log == [["server-0", "server-1"], ["server-2"], ["server-3"]]
    assert [r.name for r, _ in made] == ["server-3", "server-1"]  # (server-0's place)
    assert [r.name for r, _ in failed] == ["server-0", "server-2"]
    # none to spare: the place is left out
    made, failed = dial_places(chosen, [], _dialer({"server-0"}, []))
    assert [r.name for r, _ in made] == ["server-1"] and len(failed) == 1


def test_an_error_that_is_not_the_transports_closes_what_was_made() -> None:
    made: list[_Ch] = []

    def dial(rs: list[Replica]) -> list[Channel | TransportError]:
        if made:
            raise KeyboardInterrupt
        made.extend(_Ch(r.name) for r in rs)
        return [TransportError("down"), cast(Channel, made[1])]

    chosen, spares = choose(PLACES, _reps("server-0", "server-1", "server-2"))
    with pytest.raises(KeyboardInterrupt):
        dial_places(chosen, spares, dial)
    assert made[1].closed


def test_replication_text() -> None:
    assert replication_text(["server-0", "server-1"], named=False) == "2"
    assert replication_text(["a", "b"], named=True) == '"a,b"'
    # names that a count would make are still names, as written (it said "1")
    assert replication_text(["server-0"], named=True) == '"server-0"'


def test_a_load_ratio_shorter_than_the_replicas_is_a_config_error_not_an_index_error() -> None:
    check_shares((1.0, 2.0), ["s-0", "s-1"], "s", "f", "k", "app.toml")
    check_shares((1.0, 2.0), ["s-1"], "s", "f", "k", "app.toml")  # (fewer found: first shares)
    check_shares(None, ["s-0", "s-1", "s-2"], "s", "f", "k", "app.toml")
    with pytest.raises(ConfigError, match=r"app.toml: modules.client.use.f.loadratio: the "
                       r"load ratio has 2 shares but 3 replicas of module 's' serve 'f' "
                       r"\(s-0, s-1, s-2\) \(give it one share per replica\)"):
        check_shares((1.0, 2.0), ["s-0", "s-1", "s-2"], "s", "f",
                     "modules.client.use.f.loadratio", "app.toml")


def test_a_count_fills_its_places_from_the_clients_turn() -> None:
    """At a registry other clients share, a replication given as a count takes its
    replicas from its turn on (turn t: from position t x count, in name order), so
    clients of one replica each spread over them; the rotation then starts at the
    first of them. Named places, or no more registered than places, keep `choose`'s,
    the rotation starting at the turn; without a turn, `choose`'s from the first."""
    regs = _reps("server-10", "server-2", "server-0", "server-1")  # (natural order)

    def picked(configured: list[str], turn: int | None) -> tuple[list[str], list[str], int]:
        chosen, spares, start = places("server", configured, regs, turn)
        return _names(chosen), _names(spares), start

    one = ["server-0"]
    assert [picked(one, t)[0] for t in range(5)] == [
        ["server-0"], ["server-1"], ["server-2"], ["server-10"], ["server-0"]]
    assert picked(one, 1) == (["server-1"], ["server-2", "server-10", "server-0"], 0)
    assert picked(PLACES, 1) == (["server-2", "server-10"], ["server-0", "server-1"], 0)
    assert picked(PLACES, 3)[0] == ["server-2", "server-10"]  # (6 mod 4: round the end)
    assert picked(one, None) == (["server-0"], ["server-1", "server-10", "server-2"], 0)
    # a load ratio's shares (or migration paths) follow the names: the configured ones
    # first, as without a turn
    assert places("server", PLACES, regs, 1, named=True)[2] == 1
    assert _names(places("server", PLACES, regs, 1, named=True)[0]) == PLACES
    # named places: the configuration's; as many places as replicas: all, rotated from
    # the turn by the dispatcher
    assert picked(["server-1", "server-0"], 1) == (
        ["server-1", "server-0"], ["server-10", "server-2"], 1)
    four = [f"server-{i}" for i in range(4)]
    assert picked(four, 2) == (["server-0", "server-1", "server-2", "server-10"], [], 2)
