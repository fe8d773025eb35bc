"""A ``HOST:PORT`` address as the configuration and the command line take one: a host
name or IPv4 address, or an IPv6 address in brackets (``[::1]:7700``), with a zone
where the transport dials one (``[fe80::1%eth0]:7700``, ``[fe80::1%2]:7700``); and why
one is not, said so the user can write it as meant.

A zone names an interface of the dialling host, so it is looked up as the transport
looks it up (getaddrinfo, numeric: no DNS), on this host: glibc takes a zone's name only
on a link-local address, its number on any.
"""

from __future__ import annotations

import ipaddress
import re
import socket

__all__ = ["MALFORMED", "address_fault"]

MALFORMED = "expected HOST:PORT"  # (the fault with nothing more particular to say)
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


def address_fault(text: str, lowest_port: int = 1) -> str | None:
    """Why ``text`` is no ``HOST:PORT`` with ``lowest_port <= PORT <= 65535``: `MALFORMED`,
    ``"port"`` for a port out of that range, or a particular reason (an IPv6 address
    without its brackets, a zone this host cannot dial); None if it is one."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isascii() or not port.isdecimal() or not host:
        return MALFORMED
    if host.startswith("[") and host.endswith("]"):
        why = _bracketed(host[1:-1])
    elif ":" in host:
        why = (f"an IPv6 address is written in brackets: [{host}]:{port}"
               if _ipv6(host) is not None else MALFORMED)
    else:
        why = None if _NAME.fullmatch(host) else MALFORMED
    if why is not None:
        return why
    return None if lowest_port <= int(port) <= 65535 else "port"


def _ipv6(text: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def _bracketed(inner: str) -> str | None:
    ip = _ipv6(inner)
    if ip is None:
        try:
            ipaddress.IPv4Address(inner)  # ([10.0.0.5]: dialled as 10.0.0.5, as it was)
            return None
        except ValueError:
            return (f"[{inner}] is no IPv6 address (brackets hold one; a host name or an "
                    "IPv4 address goes without them)")
    if ip.scope_id is None:
        return None
    try:
        socket.getaddrinfo(inner, None, socket.AF_INET6, socket.SOCK_STREAM, 0,
                           socket.AI_NUMERICHOST)
    except OSError as exc:
        zone, plain = ip.scope_id, inner.partition("%")[0]
        if not zone.isdecimal():
            try:
                socket.if_nametoindex(zone)
            except OSError:
                return f"this host has no interface {zone!r} (the zone of {inner})"
            if not ip.is_link_local:
                return (f"a zone name (%{zone}) is taken only on a link-local address "
                        f"(fe80::/10): {plain} is dialled without it, or with the "
                        "interface's number")
        return f"{inner} does not resolve here: {exc.strerror or exc}"
    return None
