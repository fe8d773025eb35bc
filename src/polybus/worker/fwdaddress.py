"""A Forward's ``to``, as a replica's peers (fwdpeers.py) check and quote it.

``to`` comes from a client: one that is no address is told to that client alone (not
dialled, remembered or logged), and an address is quoted cut short in what is logged
or sent back (tests/unit/test_fwd_bad_address.py).
"""

from __future__ import annotations

from polybus.errors import TransportError
from polybus.registry.limits import ADDRESS_MAX, said
from polybus.transport.endpoints import Address

__all__ = ["not_an_address", "quoted"]


def not_an_address(to: str) -> TransportError | None:
    """The error for a ``to`` that names no one (marked: not remembered as unreached)."""
    if len(to) > ADDRESS_MAX:
        why = f"it is longer than any ({len(to):,} characters; at most {ADDRESS_MAX:,})"
    else:
        try:
            Address.parse(to)
            return None
        except TransportError as exc:  # (it quotes the address whole: said short here)
            why = str(exc).replace(repr(to), said(to))
    fault = TransportError(f"{said(to)} is not an address: {why}")
    fault.not_an_address = True  # type: ignore[attr-defined]
    return fault


def quoted(text: str) -> str:
    """A client's text (an address) as it is if short and printable, else `said`."""
    return text if len(text) <= 200 and text.isprintable() else said(text, 200)
