"""Where a call that timed out stood, as its CallTimeoutError says it: the replica it
was written to, and what that replica had not yet answered of this client's calls made
before it. A call that takes a microsecond and times out has waited behind those: most
often a call given up at its own deadline, which the replica runs to its end (Python
cannot stop a running function; docs/reliability.md, "Deadlines"), so the message
names them rather than leave "no answer from balance within 1 s" a puzzle."""

from __future__ import annotations

from collections import Counter
from itertools import islice
from typing import Any

from polybus.plural import plural

__all__ = ["LOOKED_AT", "where"]

# Calls looked at, at most, in each of the replica's lists (unanswered, given up): a
# burst of calls timing out together each looked at every other, 8,000 taking 25 s of
# the client's CPU; past this the message says "N or more".
LOOKED_AT = 64


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
    more = False
    if mine is not None:  # (both in the order written, about: ids before ``mine`` first)
        for cid, other in list(islice(link.outstanding.items(), LOOKED_AT)):
            if other is not rec and cid < mine:
                ahead[_interface(other.dispatcher)] += 1
        for cid, d in list(islice(link.abandoned.items(), LOOKED_AT)):
            if cid < mine:
                ahead[_interface(d)] += 1
                given_up += 1
        more = len(link.outstanding) > LOOKED_AT or len(link.abandoned) > LOOKED_AT
    n = sum(ahead.values())
    if not n:
        return f" (sent to {link.name})"
    names = ", ".join(f"{name} x{k}" if k > 1 else name for name, k in ahead.most_common())
    text = (f" (sent to {link.name}, which had not yet answered "
            f"{plural(n, 'call')}{' or more' if more else ''} made before it: {names}")
    if given_up:
        of = "" if n == 1 else "both " if n == given_up == 2 else (
            "all " if n == given_up else f"{given_up} of them ")
        own = "its own deadline" if given_up == 1 else "their own deadlines"
        text += f", {of}given up at {own} (a replica runs a call it began to its end)"
    return text + ")"


def _interface(d: Any) -> str:
    return str(getattr(d, "interface", "?"))
