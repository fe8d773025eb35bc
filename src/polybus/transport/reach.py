"""Who can reach a listener, said where it matters across hosts.

A process started by hand on one host of several (`polybus registry`, `polybus worker`,
`polybus serve`) says at start what a new user finds out only at a peer's first dial:

- `registers`: the address a worker registers for a TCP listener bound to a wildcard
  (``--listen tcp://0.0.0.0:0``): the address this host reaches its registry from, which
  the registry's network can dial (0.0.0.0 registered as it is sent every client to its
  own host);
- `loopback_only`: a worker listening on loopback alone whose registry is dialled
  beyond this host: clients elsewhere find it, and cannot dial it;
- `wildcard_on_loopback`: a worker listening on every interface that registers a
  loopback address, its registry given at loopback (on the registry's own host):
  clients elsewhere find that, and cannot dial it;
- `plain_beyond`: a listener beyond loopback with no ``[cluster] tls``: the cluster
  token still keeps out whoever lacks it, but what the connections carry crosses the
  network in clear.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from collections.abc import Sequence

from polybus.errors import TransportError
from polybus.transport.endpoints import WILDCARDS, Address

__all__ = ["is_loopback", "loopback_only", "on_this_host", "plain_beyond", "registers",
           "route_to", "wildcard_on_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this host's loopback (127.0.0.0/8, ::1, "localhost")."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # (a name: resolved, as a peer would)
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def on_this_host(host: str) -> bool:
    """Whether ``host`` (of a TCP address a peer was dialled at) is this host: its
    loopback, its name, or an address of one of its interfaces, each address it resolves
    to (the kernel sends traffic to such an address from that address itself:
    `route_to`). A run's summary says the host of a replica elsewhere (summary.py)."""
    if is_loopback(host) or host == socket.gethostname():
        return True
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    ips = {str(i[4][0]) for i in infos}
    return bool(ips) and all(route_to(Address("tcp", ip, 9)) == ip for ip in ips)


def route_to(target: Address, family: int = 0) -> str | None:
    """The address of this host's interface that traffic to ``target`` (a TCP address)
    leaves from, as the kernel routes it (a UDP socket connected there sends nothing);
    None when there is no route, or ``target`` does not resolve. ``family``: only an
    address of it (socket.AF_INET for a listener bound to 0.0.0.0, which takes no IPv6
    connection); 0 for any."""
    try:
        infos = socket.getaddrinfo(target.host, target.port or 9, family,
                                   type=socket.SOCK_DGRAM)
    except OSError:
        return None
    for family, kind, proto, _, where in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.connect(where)
                return str(s.getsockname()[0])
        except OSError:
            continue
    return None


def registers(addresses: Sequence[Address], registry: str) -> list[Address]:
    """``addresses`` as a worker registers them: a TCP one bound to a wildcard takes the
    address this host reaches ``registry`` from (else this host's name, as a replica of
    the mpi and ray engines registers), of a family the listener takes: an IPv4 one for
    0.0.0.0 (a registry reached over IPv6, a name that resolves to IPv6 first, gave an
    IPv6 address no client could connect to). Others as they are."""
    if not any(a.scheme == "tcp" and a.host in WILDCARDS for a in addresses):
        return list(addresses)
    try:
        target: Address | None = Address.parse(registry)
    except TransportError:  # (a malformed registry is said by its client, first)
        target = None

    def host(wildcard: str) -> str:
        family = 0 if ":" in wildcard else socket.AF_INET  # (:: takes IPv4 too: dual stack)
        return (route_to(target, family) if target is not None and target.scheme == "tcp"
                else None) or socket.gethostname()

    return [dataclasses.replace(a, host=host(a.host))
            if a.scheme == "tcp" and a.host in WILDCARDS else a for a in addresses]


def loopback_only(name: str, addresses: Sequence[Address], registry: str,
                  configured: bool = False) -> str | None:
    """The warning for a worker whose TCP addresses are all on loopback while its
    ``registry`` is dialled beyond this host; None otherwise. ``configured``: it was
    started with ``--config``, whose ``[cluster] listen_host`` it reads too."""
    tcp = [a for a in addresses if a.scheme == "tcp"]
    try:
        target = Address.parse(registry)
    except TransportError:
        return None
    if not tcp or target.scheme != "tcp" or is_loopback(target.host) \
            or not all(is_loopback(a.host) for a in tcp):
        return None
    here = route_to(target)
    listen = (f"{Address('tcp', here, 0)}" if here
              else "tcp://ADDRESS:0 (an address of this host)")
    return (f"polybus worker {name}: warning: it listens on {tcp[0]}, this host's loopback, "
            f"and registers that with the registry at {str(target).removeprefix('tcp://')}, which "
            f"is dialled beyond this host: a client on another host finds it there and "
            f"cannot dial it. To serve other hosts, start it with --listen {listen}"
            f"{'' if here is None else ' (the address this host reaches the registry from)'}"
            f"{', or set [cluster] listen_host in its configuration' if configured else ''}")


def wildcard_on_loopback(name: str, bound: Sequence[Address], registered: Sequence[Address],
                         registry: str, configured: bool = False) -> str | None:
    """The warning for a worker bound to a wildcard (``--listen tcp://0.0.0.0:0``) that
    registers a loopback address, as it does when it reaches its registry at loopback
    (`registers`): other hosts find that address and cannot dial it; None otherwise.
    ``registered``: ``bound`` as registered, address by address."""
    for b, r in zip(bound, registered, strict=False):
        if b.scheme == "tcp" and b.host in WILDCARDS and r.scheme == "tcp" \
                and is_loopback(r.host):
            return (f"polybus worker {name}: warning: it listens on every interface ({b}) "
                    f"but registers {r}, the address this host reaches its registry at "
                    f"{registry.removeprefix('tcp://')} from: only this host can dial that, "
                    "and a client on another host that finds it there cannot. To serve "
                    "other hosts, give --registry the address other hosts reach the "
                    "registry at" + (" (--registry, or [cluster] registry in its "
                                     "configuration)" if configured else ""))
    return None


def plain_beyond(who: str, address: Address) -> str | None:
    """The warning for ``who`` listening on TCP ``address`` beyond loopback with no
    ``[cluster] tls`` set in this process; None otherwise."""
    from polybus.transport import tls

    if address.scheme != "tcp" or tls.current() is not None or is_loopback(address.host):
        return None
    where = "every interface" if address.host in WILDCARDS else address.host
    return (f"{who}: warning: listening on {address} ({where}) in plain TCP, beyond this "
            f"host: the cluster token still keeps out whoever lacks it, but calls, their "
            f"values and answers cross the network unencrypted; set [cluster] tls "
            f"(docs/security.md, \"TLS\") for traffic between hosts")
