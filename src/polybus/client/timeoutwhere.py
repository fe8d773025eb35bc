"""Where a call that timed out stood, as its CallTimeoutError says it: the replica it
was written to, and what that replica had not yet answered of this client's calls made
before it. A call that takes a microsecond and times out has waited behind those: most
often a call given up at its own deadline, which the replica runs to its end (Python
cannot stop a running function; docs/reliability.md, "Deadlines"), so the message
names them rather than leave "no answer from balance within 1 s" a puzzle."""

from __future__ import annotations

from collections import Counter
from typing import Any

from polybus.plural import plural

__all__ = ["where"]


def where(rec: Any) -> str:
    """`` (sent to bank-0, which had not yet answered 2 calls made before it: audit x2, 1
    of them given up at its own deadline ...)``; ``" (sent to bank-0)"`` when nothing
    was ahead of it; "" for a call never written to a replica. Read before the call
    leaves its replica's calls (`give_up`)."""
    link = getattr(rec, "link", None)
    if link is None:
        return ""
    mine = getattr(rec, "id", None)
    ahead: Counter[str] = Counter()
    given_up = 0
    for cid, other in list(link.outstanding.items()):
        if other is not rec and mine is not None and cid < mine:
            ahead[_interface(other.dispatcher)] += 1
    for cid, d in list(link.abandoned.items()):
        if mine is not None and cid < mine:
            ahead[_interface(d)] += 1
            given_up += 1
    n = sum(ahead.values())
    if not n:
        return f" (sent to {link.name})"
    names = ", ".join(f"{name} x{k}" if k > 1 else name for name, k in ahead.most_common())
    text = (f" (sent to {link.name}, which had not yet answered "
            f"{plural(n, 'call')} made before it: {names}")
    if given_up:
        of = "" if n == 1 else "both " if n == given_up == 2 else (
            "all " if n == given_up else f"{given_up} of them ")
        text += f", {of}given up at its own deadline (a replica runs a call it began to its end)"
    return text + ")"


def _interface(d: Any) -> str:
    return str(getattr(d, "interface", "?"))
