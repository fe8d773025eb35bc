"""What polybus says of reach across hosts, without leaving loopback: a wildcard
listener registered where the registry can dial it, a loopback worker of a registry
beyond its host, plain TCP beyond the host, a replica taken for dead that may be cut
off by the network, and the members a registry started by hand sees come and go. (The
same across real namespaces: tests/chaos/test_hosts_by_hand.py.)"""

from __future__ import annotations

import logging
import time

import pytest

from polybus.client.dialing import unreached_line
from polybus.client.lossline import LossLines
from polybus.client.lostnotes import silence_note
from polybus.errors import ConnectionLostError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.transport import reach, tls
from polybus.transport.endpoints import Address
from polybus.wire.messages import Replica

TOKEN = b"hosts-said-token-0123456789abcdef"


def test_a_wildcard_listener_registers_where_this_host_reaches_its_registry() -> None:
    bound = [Address("tcp", "0.0.0.0", 5000), Address("ipc", path="/run/x.ipc")]
    assert reach.registers(bound, "127.0.0.1:7700") == [Address("tcp", "127.0.0.1", 5000),
                                                        bound[1]]
    named = [Address("tcp", "10.9.9.9", 5000)]  # (a host given: registered as it is)
    assert reach.registers(named, "127.0.0.1:7700") == named


def test_a_loopback_worker_of_a_registry_beyond_its_host_is_told_how_to_listen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach, "route_to", lambda target: "10.9.9.6")  # (no route asked)
    loop = [Address("tcp", "127.0.0.1", 5000)]
    said = reach.loopback_only("server-0", loop, "10.9.9.5:7700")
    assert said is not None
    assert "polybus worker server-0: warning: it listens on tcp://127.0.0.1:5000" in said
    assert "registry at 10.9.9.5:7700" in said
    assert "--listen tcp://10.9.9.6:0" in said
    assert "listen_host" not in said  # (--module: no configuration to set it in)
    configured = reach.loopback_only("server-0", loop, "10.9.9.5:7700", configured=True)
    assert configured is not None
    assert configured.endswith("--listen tcp://10.9.9.6:0 (the address this host reaches "
                               "the registry from), or set [cluster] listen_host in its "
                               "configuration")
    # Nothing to say on one host, or for a worker that listens beyond loopback.
    assert reach.loopback_only("server-0", loop, "127.0.0.1:7700") is None
    assert reach.loopback_only("server-0", [Address("tcp", "10.9.9.6", 5000)],
                               "10.9.9.5:7700") is None


def test_plain_tcp_beyond_the_host_is_said_and_tls_or_loopback_is_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert tls.current() is None
    said = reach.plain_beyond("polybus registry", Address("tcp", "10.9.9.5", 7700))
    assert said is not None and "in plain TCP, beyond this host" in said
    assert "set [cluster] tls" in said
    wild = reach.plain_beyond("polybus registry", Address("tcp", "0.0.0.0", 7700))
    assert wild is not None and "every interface" in wild
    assert reach.plain_beyond("polybus registry", Address("tcp", "127.0.0.1", 7700)) is None
    monkeypatch.setattr(tls, "current", lambda: object())  # (in TLS: nothing to say)
    assert reach.plain_beyond("polybus registry", Address("tcp", "10.9.9.5", 7700)) is None


def test_a_replica_registered_at_loopback_of_a_registry_beyond_is_said_why() -> None:
    here = Replica("server-0", "server", "tcp://127.0.0.1:5000", ["f"])
    line = unreached_line(here, "tcp", "Connection refused", "10.9.9.5:7700")
    assert line.startswith("server-0 at tcp://127.0.0.1:5000: Connection refused (an "
                           "address only its own host can dial")
    assert "--listen tcp://ADDRESS:0" in line
    wild = Replica("server-1", "server", "tcp://0.0.0.0:5000", ["f"])
    assert "only its own host" in unreached_line(wild, "tcp", "refused", "10.9.9.5:7700")
    # On one host, or an address beyond loopback: the error alone.
    assert unreached_line(here, "tcp", "refused", "127.0.0.1:7700") == \
        "server-0 at tcp://127.0.0.1:5000: refused"
    there = Replica("server-2", "server", "tcp://10.9.9.6:5000", ["f"])
    assert unreached_line(there, "tcp", "refused", "10.9.9.5:7700") == \
        "server-2 at tcp://10.9.9.6:5000: refused"


def test_a_replica_taken_for_dead_may_be_cut_off_by_the_network(
        caplog: pytest.LogCaptureFixture) -> None:
    error = ConnectionLostError("server-1 sent nothing for 3 s while holding calls "
                                "(heartbeat 1 s); taken for dead", heartbeat=1.0)
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        lines = LossLines()
        lines.lost("server-1", "server", error)
        lines.close()
    said = caplog.text
    assert "replica server-1 of module 'server' was lost" in said
    assert "in a call that holds the GIL" in said
    assert "cut off from this host by the network" in said
    assert "cut off from this host by the network" in silence_note(error)


def _wait_for(lines: list[str], part: str, within: float = 5.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for line in list(lines):
            if part in line:
                return line
        time.sleep(0.02)
    raise AssertionError(f"no line with {part!r} in {lines}")


def test_a_registry_started_by_hand_says_its_members_come_and_go() -> None:
    lines: list[str] = []
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=0.5, say=lines.append) as reg:
        silent = RegistryClient(f"127.0.0.1:{reg.address.port}", TOKEN)
        try:
            silent.register(Replica("server-0", "server", "tcp://127.0.0.1:5000", ["f"]))
            assert _wait_for(lines, "server-0 registered") == (
                "registry: server-0 registered (module 'server', tcp://127.0.0.1:5000)")
            # No heartbeat past the ttl, its connection open: dropped, said without a look.
            dropped = _wait_for(lines, "dropped server-0")
            assert dropped.startswith("registry: dropped server-0 (module 'server', "
                                      "tcp://127.0.0.1:5000): no heartbeat for ")
            assert dropped.endswith("(ttl 0.5 s)")
        finally:
            silent.close()
    lines.clear()
    with RegistryService(TOKEN, "tcp://127.0.0.1:0", ttl=60, say=lines.append) as reg:
        leaving = RegistryClient(f"127.0.0.1:{reg.address.port}", TOKEN)
        try:
            leaving.register(Replica("server-1", "server", "tcp://127.0.0.1:5001", ["f"]))
            _wait_for(lines, "server-1 registered")
            leaving.close()  # (its connection closes: it goes)
            assert _wait_for(lines, "server-1 (module") == (
                "registry: server-1 (module 'server', tcp://127.0.0.1:5001) went: its "
                "connection closed")
        finally:
            leaving.close()


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.connect(("::1", 9))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_an_ipv4_wildcard_never_registers_the_ipv6_address_its_registry_is_reached_from(
        ) -> None:
    """A listener bound to 0.0.0.0 takes IPv4 connections alone: with a registry reached
    over IPv6 (a name that resolves to IPv6 first) it registered ::1, and every client
    was refused. An IPv6 wildcard (::, dual stack) takes either."""
    got = reach.registers([Address("tcp", "0.0.0.0", 5000)], "[::1]:7700")
    assert len(got) == 1 and ":" not in got[0].host and got[0].port == 5000
    assert reach.registers([Address("tcp", "::", 5000)], "[::1]:7700") == [
        Address("tcp", "::1", 5000)]


def test_the_listen_address_suggested_for_an_ipv6_route_is_bracketed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach, "route_to", lambda target, family=0: "fd00::6")
    said = reach.loopback_only("server-0", [Address("tcp", "127.0.0.1", 5000)],
                               "[fd00::5]:7700")
    assert said is not None and "--listen tcp://[fd00::6]:0 " in said


def test_a_wildcard_worker_that_registers_loopback_says_other_hosts_cannot_dial_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """On the registry's own host, given the registry at 127.0.0.1, a worker listening on
    every interface registers 127.0.0.1 (the address it reaches that registry from):
    a client on another host finds that and cannot dial it. It said nothing of it."""
    from polybus.worker.main import _say_reach

    _say_reach("server-0", [Address("tcp", "0.0.0.0", 5000)], "127.0.0.1:7700", False)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "registers" in line]
    assert said == [
        "polybus worker server-0: warning: it listens on every interface "
        "(tcp://0.0.0.0:5000) but registers tcp://127.0.0.1:5000, the address this host "
        "reaches its registry at 127.0.0.1:7700 from: only this host can dial that, and a "
        "client on another host that finds it there cannot. To serve other hosts, give "
        "--registry the address other hosts reach the registry at"], err
    # Registered beyond loopback (a registry dialled beyond this host), or a worker on
    # loopback anyway: nothing of the kind.
    assert reach.wildcard_on_loopback("server-0", [Address("tcp", "0.0.0.0", 5000)],
                                      [Address("tcp", "10.9.9.6", 5000)],
                                      "10.9.9.5:7700") is None
    loop = [Address("tcp", "127.0.0.1", 5000)]
    assert reach.wildcard_on_loopback("server-0", loop, loop, "127.0.0.1:7700") is None
    configured = reach.wildcard_on_loopback(
        "server-0", [Address("tcp", "0.0.0.0", 5000)], loop, "127.0.0.1:7700",
        configured=True)
    assert configured is not None and configured.endswith(
        "the registry at (--registry, or [cluster] registry in its configuration)")


def test_this_host_is_its_loopback_its_name_and_its_own_addresses() -> None:
    """What a run's summary takes for a replica on this host (no `host` said for it)."""
    import socket

    assert reach.on_this_host("127.0.0.1") and reach.on_this_host("localhost")
    assert reach.on_this_host("::1") and reach.on_this_host(socket.gethostname())
    # An address of one of its interfaces (the one it reaches the world from, if any)
    own = reach.route_to(Address("tcp", "198.51.100.7", 9))
    if own is not None:
        assert reach.on_this_host(own), own
    assert not reach.on_this_host("198.51.100.7")  # (TEST-NET-2: no host's address)
    assert not reach.on_this_host("no-such-host.invalid")
