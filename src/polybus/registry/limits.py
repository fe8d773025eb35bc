"""What the registry takes from a peer that has passed the handshake, and how it quotes it.

The token keeps strangers out; a peer that holds it may still send anything a message
can carry. The registry stores a `Register`'s replica and hands it to every client, and
its log names what peers send, so it takes only what a real program sends: names (a
replica's, its module's, each interface's, its source's digest) of at most `NAME_MAX`
characters, addresses that parse (`Address.parse`, as clients dial them) of at most
`ADDRESS_MAX`, at most `INTERFACES_MAX` interfaces and `ADDRESSES_MAX` addresses a
replica, its settings (at most `SETTINGS_MAX`, each key of at most `ADDRESS_MAX`
characters and value of at most `SETTING_MAX`), every one of them printable (no
newline, tab, escape...); and at most
`REGISTRATIONS_MAX` replicas registered over one connection (registry/state.py). Anything
else is refused, naming the field and the limit; the registry serves on, and what the
connection registered stays. Peer text in its log and its answers is quoted by `said`:
escaped as ``repr`` does and cut short.
"""

from __future__ import annotations

from collections.abc import Iterator

from polybus.errors import TransportError
from polybus.transport.endpoints import Address
from polybus.wire.messages import Replica, Resolve

# Python identifiers and module names, replica names (server-0), a configuration's keys
# and an XXH3 digest are a few dozen characters; a Unix socket's path is at most 108
# bytes, a host name 253. These leave room and keep a peer from storing megabytes.
NAME_MAX = 256
ADDRESS_MAX = 1024
INTERFACES_MAX = 4096
ADDRESSES_MAX = 16
# A worker registers its one replica over its own connection (again under the same name
# after a drop: the same registration); a program that registers for others (a test of
# a large cluster registers 300 over one) has room. This keeps one connection from
# growing the registry without end under ever new names.
REGISTRATIONS_MAX = 1024
# A replica's settings (config/workerside.py): two per interface (of a pool of processes:
# its pool and its idempotent) and a few more; a value is short but for a CPU list, which
# on a machine of thousands of CPUs may be long (a worker leaves out one over this).
SETTINGS_MAX = 2 * INTERFACES_MAX + 64
SETTING_MAX = 16 * 1024
SAID_MAX = 80  # characters of peer text in a log line or an answer


def said(text: str, most: int = SAID_MAX) -> str:
    """Peer text as the registry quotes it: ``repr``'s escapes (a newline is ``\\n``,
    an escape ``\\x1b``), cut to about ``most`` characters, its length said when cut."""
    shown = repr(text)
    if len(shown) <= most:
        return shown
    return f"{shown[:most]}... ({len(text):,} characters)"


def _text(field: str, text: str, most: int) -> str | None:
    if len(text) > most:
        return (f"its {field} {said(text)} is {len(text):,} characters long, over the "
                f"registry's limit of {most:,}")
    if text.isprintable():
        return None
    at, c = next((i, c) for i, c in enumerate(text) if not c.isprintable())
    return (f"its {field} {said(text)} holds a character that is not printable "
            f"({said(c)} at {at})")


def _address(field: str, text: str) -> str | None:
    if (fault := _text(field, text, ADDRESS_MAX)) is not None:
        return fault
    try:
        Address.parse(text)
    except TransportError as exc:  # (it quotes the address whole: said short here)
        return f"its {field}: {str(exc).replace(repr(text), said(text))}"
    return None


def _many(field: str, items: list[str], most: int) -> str | None:
    if len(items) > most:
        return (f"its {field} are {len(items):,}, over the registry's limit of {most:,} "
                f"a replica")
    return None


def replica_fault(r: Replica) -> str | None:
    """Why the registry refuses to register ``r`` (naming the field and the limit), or
    None when it takes it. (Its speed is checked with the registry's state.)"""
    return next((f for f in _faults(r) if f is not None), None)


def _faults(r: Replica) -> Iterator[str | None]:
    """Each field's fault, in order (the first stops the look: no more is read)."""
    yield _text("name", r.name, NAME_MAX)
    yield _text("module", r.module, NAME_MAX)
    yield _text("source", r.source, NAME_MAX)
    yield _many("interfaces", r.interfaces, INTERFACES_MAX)
    yield from (_text(f"interface [{i}]", n, NAME_MAX) for i, n in enumerate(r.interfaces))
    yield _address("address", r.address)
    yield _many("addresses", r.addresses, ADDRESSES_MAX)
    yield from (_address(f"address [{i}]", a) for i, a in enumerate(r.addresses))
    if len(r.settings) > SETTINGS_MAX:
        yield (f"its settings are {len(r.settings):,}, over the registry's limit of "
               f"{SETTINGS_MAX:,} a replica")
    for k, v in r.settings.items():
        yield _text("setting", k, ADDRESS_MAX) or _text(f"setting {said(k)}", v, SETTING_MAX)


def resolve_fault(msg: Resolve) -> str | None:
    """Why the registry refuses to answer ``msg``, or None."""
    return (_text("module", msg.module, NAME_MAX)
            or _text("interface", msg.interface, NAME_MAX))
