"""A registry's address given on the command line (``--registry`` of run, serve and
worker; ``registry=`` of `polybus.run`) is refused as ``[cluster] registry`` refuses it,
by the same check, before anything starts. ``run --registry 127.0.0.1:0`` said "no
registry answers", where ``registry = "127.0.0.1:0"`` is refused outright, and
``--registry ''`` ran the program on a cluster of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.cli.main import main
from polybus.config import validate
from polybus.config.cluster import REGISTRY_FORMS, registry_fault
from polybus.errors import UsageError
from polybus.testing.apps import write_one_call_app

SERVED = ('[serve]\nlisten = "127.0.0.1:0"\n\n[serve.routes]\n"/" = "server.f"\n')
REFUSED = ["127.0.0.1:0", "127.0.0.1:99999", "localhost", "127.0.0.1:", ":7700",
           "127.0.0.1:7700/x"]


@pytest.mark.parametrize("address", [*REFUSED, ""])
def test_what_cluster_registry_refuses_the_command_line_refuses(
        address: str, tmp_path: Path) -> None:
    assert registry_fault(address) is not None
    if address:  # (an empty one in a configuration: its own message, not this one)
        app = write_one_call_app(tmp_path)
        config, errs = validate(app, (f'cluster.registry="{address}"',))
        assert config is None and [e.key for e in errs] == ["cluster.registry"]


@pytest.mark.parametrize("address", ["127.0.0.1:7700", "[::1]:7700", "10.0.0.5:1",
                                     "host.example.org:65535", "tcp://127.0.0.1:7700",
                                     "inproc://registry-1"])  # (left to the transport)
def test_a_registry_address_is_taken(address: str) -> None:
    assert registry_fault(address) is None


@pytest.mark.parametrize("command", [
    ["run", "{app}"],
    ["serve", "{app}"],
    ["worker", "--module", "{server}"],
])
@pytest.mark.parametrize("address", ["127.0.0.1:0", "", "localhost"])
def test_the_command_line_refuses_it_before_anything_starts(
        command: list[str], address: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    app = write_one_call_app(tmp_path, server="def f(x=1):\n    return x\n", tail=SERVED)
    argv = [a.format(app=app, server=tmp_path / "server.py") for a in command]
    assert main([*argv, "--registry", address]) == 2
    err = capsys.readouterr().err
    assert f"polybus {command[0]}: error: --registry {address!r}: " in err, err
    assert REGISTRY_FORMS in err
    if address == "127.0.0.1:0":
        assert "port 0" in err


def test_polybus_run_refuses_it_too(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--registry '127\.0\.0\.1:0'"):
        polybus.run(write_one_call_app(tmp_path), registry="127.0.0.1:0")


def _lo_index() -> int:
    import socket

    return socket.if_nametoindex("lo")


@pytest.mark.parametrize("address", [
    "[fe80::1%lo]:7700", "tcp://[fe80::1%lo]:7700", "[::1%{lo}]:7700", "tcp://[::1]:7700",
    "[fe80::1%{lo}]:7700"])
def test_a_zone_scoped_ipv6_address_the_transport_dials_is_taken(
        address: str, tmp_path: Path) -> None:
    """A link-local address is dialled with its zone, the interface it is on (``%lo``,
    ``%2``), as the transport dials it (getaddrinfo); the check refused every zone."""
    address = address.format(lo=_lo_index())
    assert registry_fault(address) is None
    if not address.startswith("tcp://"):
        config, errs = validate(write_one_call_app(tmp_path),
                                (f'cluster.registry="{address}"',))
        assert errs == [] and config is not None and config.cluster.registry == address


@pytest.mark.parametrize(("address", "why"), [
    # the form `polybus registry` printed for a registry on ::1
    ("::1:7700", "an IPv6 address is written in brackets: [::1]:7700"),
    ("tcp://fe80::1%lo:7700", "an IPv6 address is written in brackets: [fe80::1%lo]:7700"),
    ("[zz]:7700", "[zz] is no IPv6 address (brackets hold one; a host name or an IPv4 "
                  "address goes without them)"),
    ("[::1%]:7700", "[::1%] is no IPv6 address"),
    ("[fe80::1%nosuchif0]:7700", "this host has no interface 'nosuchif0' (the zone of "
                                 "fe80::1%nosuchif0)"),
    ("[::1%lo]:7700", "a zone name (%lo) is taken only on a link-local address "
                      "(fe80::/10): ::1 is dialled without it, or with the interface's "
                      "number"),
])
def test_an_ipv6_address_the_transport_cannot_dial_is_refused_with_the_reason(
        address: str, why: str, tmp_path: Path) -> None:
    fault = registry_fault(address)
    assert fault is not None and fault.startswith(f"bad registry address: {why}"), fault
    assert fault.endswith(f"({REGISTRY_FORMS})"), fault
    if not address.startswith("tcp://"):
        config, errs = validate(write_one_call_app(tmp_path),
                                (f'cluster.registry="{address}"',))
        assert config is None and [e.key for e in errs] == ["cluster.registry"]
        assert f"bad registry address {address!r}: {why}" in str(errs[0]), errs[0]


@pytest.mark.parametrize("command", [["run", "{app}"], ["worker", "--module", "{server}"]])
def test_a_url_of_another_scheme_is_refused_as_the_registry_option(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--registry http://127.0.0.1:7700`: it was said as the transport's "registry
    address: unknown transport 'http' ... (tcp, ipc, shm, or inproc within one
    process)", after the token was read, naming no option and forms no registry has."""
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    app = write_one_call_app(tmp_path)
    argv = [a.format(app=app, server=tmp_path / "server.py") for a in command]
    assert main([*argv, "--registry", "http://127.0.0.1:7700"]) == 2
    assert capsys.readouterr().err == (
        f"polybus {command[0]}: error: --registry 'http://127.0.0.1:7700': bad registry "
        f"address: a registry is dialled over TCP, not http:// ({REGISTRY_FORMS})\n")
