"""RegistryState: pure name-server logic, time passed in."""

from __future__ import annotations

from polybus.registry.state import RegistryState
from polybus.wire.messages import Replica


def rep(name: str, module: str = "server", ifaces: tuple[str, ...] = ("f",)) -> Replica:
    return Replica(name, module, f"tcp://127.0.0.1:{1000 + len(name)}", list(ifaces))


def test_register_and_resolve() -> None:
    s = RegistryState(ttl=3.0)
    assert s.register(rep("server-0"), owner=1, now=0.0) is None
    assert [r.name for r in s.resolve(module="server", now=1.0)] == ["server-0"]
    assert s.names() == ["server-0"]


def test_duplicate_live_name_refused_from_another_owner() -> None:
    s = RegistryState(ttl=3.0)
    assert s.register(rep("a"), owner=1, now=0.0) is None
    reason = s.register(rep("a"), owner=2, now=1.0)
    assert reason is not None and "'a'" in reason and "live" in reason
    assert reason.endswith("give this one another name (--name)")  # (what to do)
    # The same owner may register again (a refresh after a change).
    assert s.register(rep("a"), owner=1, now=1.0) is None


def test_name_is_free_again_once_its_holder_expired() -> None:
    s = RegistryState(ttl=3.0)
    s.register(rep("a"), owner=1, now=0.0)
    assert s.register(rep("a"), owner=2, now=3.5) is None


def test_heartbeat_keeps_alive_and_expire_drops_the_silent() -> None:
    s = RegistryState(ttl=3.0)
    s.register(rep("a"), owner=1, now=0.0)
    s.register(rep("b"), owner=2, now=0.0)
    assert s.heartbeat("a", owner=1, now=2.5)
    assert not s.heartbeat("a", owner=2, now=2.5)   # not its owner
    assert not s.heartbeat("nobody", owner=1, now=2.5)
    assert s.expire(now=3.0) == []                  # exactly ttl is still alive
    assert s.expire(now=3.1) == ["b"]
    assert [r.name for r in s.resolve(now=5.0)] == ["a"]
    assert [r.name for r in s.resolve(now=5.6)] == []


def test_unregister_only_by_owner() -> None:
    s = RegistryState()
    s.register(rep("a"), owner=1, now=0.0)
    s.unregister("a", owner=2)
    assert s.names() == ["a"]
    s.unregister("a", owner=1)
    assert s.names() == []


def test_drop_owner_takes_its_registrations() -> None:
    s = RegistryState()
    s.register(rep("a"), owner=1, now=0.0)
    s.register(rep("b"), owner=1, now=0.0)
    s.register(rep("c"), owner=2, now=0.0)
    assert sorted(s.drop_owner(1)) == ["a", "b"]
    assert s.names() == ["c"]
    assert s.drop_owner(1) == []


def test_resolve_by_module_and_interface_in_natural_order() -> None:
    s = RegistryState(ttl=100)
    for i in (10, 2, 1, 0):
        s.register(rep(f"server-{i}", ifaces=("sort", "merge")), owner=i, now=0.0)
    s.register(rep("server", ifaces=("sort",)), owner=99, now=0.0)
    s.register(rep("other-0", module="other", ifaces=("merge",)), owner=50, now=0.0)
    assert [r.name for r in s.resolve(module="server", now=1.0)] == [
        "server", "server-0", "server-1", "server-2", "server-10"]
    assert [r.name for r in s.resolve(interface="merge", now=1.0)] == [
        "other-0", "server-0", "server-1", "server-2", "server-10"]
    assert [r.name for r in s.resolve(module="other", interface="sort", now=1.0)] == []
    assert s.resolve(module="server", interface="sort", now=1.0)[0].name == "server"


def test_a_heartbeat_after_expiry_is_refused_and_resurrects_nothing() -> None:
    # (The service answers it Registered(false): the worker, alive since it sent one,
    # registers again; the state itself never brings an expired entry back.)
    s = RegistryState(ttl=1.0)
    s.register(rep("a"), owner=1, now=0.0)
    assert s.expire(now=1.5) == ["a"]
    assert not s.heartbeat("a", owner=1, now=1.6)
    assert s.resolve(now=1.6) == []
    assert s.register(rep("a"), owner=1, now=1.6) is None
    assert [r.name for r in s.resolve(now=1.7)] == ["a"]


def test_each_client_that_asks_takes_the_next_turn_of_its_module() -> None:
    """The name server's round robin: the clients sharing a registry are told 0, 1, 2...
    per module and interface asked for, so each starts at another replica."""
    s = RegistryState(ttl=3.0)
    s.register(rep("server-0"), owner=1, now=0.0)
    assert [s.take_turn(module="server") for _ in range(3)] == [0, 1, 2]
    assert s.take_turn(module="other") == 0  # (a module of its own count)
    assert s.take_turn(interface="f") == 0
    assert s.take_turn(module="server") == 3
    # a resolve alone takes no turn (engines poll it while their workers start)
    s.resolve(module="server", now=1.0)
    assert s.take_turn(module="server") == 4


def test_turns_are_counted_only_for_what_live_replicas_serve() -> None:
    """A counter was kept for every module and interface a client asked a turn of:
    a peer asking about a million made-up names grew the registry by a million
    counters. Now one asking about names no replica serves is told 0 and counts
    nothing, and a counter goes when the last replica serving it does."""
    s = RegistryState(ttl=3.0)
    s.register(rep("server-0", ifaces=("f", "g")), owner=1, now=0.0)
    s.register(rep("other-0", module="other"), owner=2, now=0.0)
    assert [s.take_turn(module=f"made-up-{i}") for i in range(1000)] == [0] * 1000
    assert [s.take_turn(interface=f"made-up-{i}") for i in range(1000)] == [0] * 1000
    assert s.take_turn(module="server", interface="h") == 0  # (no replica serves h)
    assert s.turns_held() == 0
    assert [s.take_turn(module="server") for _ in range(2)] == [0, 1]
    assert s.take_turn(module="server", interface="g") == 0
    assert s.take_turn(module="other") == 0
    assert s.turns_held() == 3
    s.unregister("server-0", owner=1)  # the last replica of "server" goes: its counters too
    assert s.turns_held() == 1
    assert s.take_turn(module="server") == 0
    s.register(rep("server-1", ifaces=("f",)), owner=1, now=1.0)
    assert s.take_turn(module="server") == 0  # (counted afresh)
    s.register(rep("server-1", ifaces=("k",)), owner=1, now=1.0)  # again, other interfaces
    assert s.take_turn(module="server", interface="k") == 0
    assert s.take_turn(module="server") == 1
    assert s.drop_owner(2) == ["other-0"] and s.turns_held() == 2
    assert s.expire(now=10.0) == ["server-1"] and s.turns_held() == 0


def test_one_owner_holds_at_most_its_limit_of_registrations() -> None:
    s = RegistryState(ttl=3.0, per_connection=3)
    for i in range(3):
        assert s.register(rep(f"a-{i}"), owner=1, now=0.0) is None
    why = s.register(rep("a-3"), owner=1, now=0.0)
    assert why is not None and "holds 3 registrations" in why and "limit" in why
    assert s.names() == ["a-0", "a-1", "a-2"]  # (those held stay)
    assert s.register(rep("a-1", ifaces=("g",)), owner=1, now=1.0) is None  # (again: held)
    assert s.register(rep("b-0"), owner=2, now=1.0) is None  # (another connection's own)
    s.unregister("a-0", owner=1)
    assert s.register(rep("a-3"), owner=1, now=1.0) is None  # (room again)
    assert s.held(1) == 3 and s.held(2) == 1
