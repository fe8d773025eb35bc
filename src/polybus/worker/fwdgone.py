"""Which client sessions a consumer replica's held calls named, and which are gone.

A client's forwarded keys begin with its session's nonce (client/forward.py). The
replica notes the nonces each connection's held calls name; when a connection ends and
no other live connection named a nonce, that session is gone (`Sessions.ended`), and
fwdheld.py lets go the values that wait for its keys, and those that come later. A
session that dials again is known by its nonce again from its first held call.

A client that may dial a replica again after it took it for lost (a run at a shared
registry, the front door) ends its nonce with `DIALS_AGAIN`: its connection's end says
nothing of it, since the calls it had there are sent again on its next connection,
naming the same keys, and their values may come before them. Its values wait as any
unclaimed value does (the bound on those: fwdheld.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from polybus.wire.messages import DIALS_AGAIN

__all__ = ["GONE_BOUND", "Sessions"]

GONE_BOUND = 10_000  # nonces of clients gone, remembered to let their late values go


class Sessions:
    """The nonces (a key's first part) each connection's held calls named, the live
    connections that named each, and those of clients gone (the last `GONE_BOUND`).
    Connections are known by ``id``; the caller holds its own lock."""

    def __init__(self) -> None:
        self.nonces: dict[int, set[str]] = {}
        self.named_by: dict[str, set[int]] = {}
        self.gone: OrderedDict[str, None] = OrderedDict()

    def named(self, conn: int, keys: Iterable[str]) -> None:
        """Connection ``conn``'s call names ``keys``: their nonces are its client's."""
        nonces = self.nonces.get(conn)
        if nonces is None:
            nonces = self.nonces[conn] = set()
        for key in keys:
            nonce = key.partition(".")[0]
            if nonce not in nonces and not nonce.endswith(DIALS_AGAIN):
                nonces.add(nonce)
                self.named_by.setdefault(nonce, set()).add(conn)
                self.gone.pop(nonce, None)  # (a client that dialled again)

    def ended(self, conn: int) -> list[str]:
        """Connection ``conn`` ended: the nonces no live connection names now (gone)."""
        out = []
        for nonce in self.nonces.pop(conn, ()):
            live = self.named_by.get(nonce)
            if live is not None:
                live.discard(conn)
                if live:
                    continue
                del self.named_by[nonce]
            self.gone[nonce] = None
            if len(self.gone) > GONE_BOUND:
                self.gone.popitem(last=False)
            out.append(nonce)
        return out

    def is_gone(self, key: str) -> bool:
        """Whether ``key`` is of a session that is gone."""
        return bool(self.gone) and key.partition(".")[0] in self.gone
