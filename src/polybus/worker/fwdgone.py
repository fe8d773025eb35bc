"""Which client sessions a consumer replica's held calls named, and which are gone.

A client's forwarded keys begin with its session's nonce (client/forward.py). The
replica notes the nonces each connection's held calls name; when a connection ends and
no other live connection named a nonce, that session is gone (`Sessions.ended`), and
fwdheld.py lets go the values that wait for its keys, and those that come later. A
session that dials again is known by its nonce again from its first held call.

A client that may dial a replica again after it took it for lost (a run at a shared
registry, the front door) ends its nonce with `DIALS_AGAIN`: its connection's end lets
nothing go at once, since the calls it had there are sent again on its next connection,
naming the same keys, and their values may come before them. Its nonce has *lapsed*:
named again by a connection (its first held call there), it is live again; not named
again within `LAPSE_S` of that end, nor of its last value's arrival, its values waiting
then go (`Sessions.expired`), as a gone client's do. A client that dials again does so
well within it (its looks for a lost replica are at most 10 s apart: client/revive.py);
one killed left its values waiting until the bound on unclaimed values (512 MiB:
fwdheld.py) pushed them out, so a replica serving runs at a shared registry for days
filled that bound with the values of the runs killed there. A value that comes for a
lapsed nonce after its values went waits `LAPSE_S` again (a client back after a long
cut: its new calls' values are not dropped on arrival).

The values that came before their calls (unclaimed) are kept by key, and their keys by
nonce too (`Unclaimed`), so that a client gone costs what its own values do: its
values were found by a scan of every unclaimed value, under the replica's forwarding
lock, for each nonce gone (measured, 1,000 clients gone one by one beside 98,000
values of a live one, on a loaded 2-core machine: 9-21 ms each; now 0.2-0.35 ms, as
beside none).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from polybus.wire.messages import DIALS_AGAIN

__all__ = ["GONE_BOUND", "LAPSE_S", "Sessions", "Unclaimed"]

GONE_BOUND = 10_000  # nonces of clients gone, remembered to let their late values go
LAPSE_S = 300.0  # a lapsed nonce's values wait this long for a connection to name it


class Sessions:
    """The nonces (a key's first part) each connection's held calls named, the live
    connections that named each, and those of clients gone (the last `GONE_BOUND`).
    Connections are known by ``id``; the caller holds its own lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.nonces: dict[int, set[str]] = {}
        self.named_by: dict[str, set[int]] = {}
        self.gone: OrderedDict[str, None] = OrderedDict()
        # `DIALS_AGAIN` nonces no live connection names, each with when it lapsed (or
        # its last value came), oldest first; and those whose values went since
        self.lapsed: OrderedDict[str, float] = OrderedDict()
        self.spent: OrderedDict[str, None] = OrderedDict()
        self.clock = clock

    def named(self, conn: int, keys: Iterable[str]) -> None:
        """Connection ``conn``'s call names ``keys``: their nonces are its client's."""
        nonces = self.nonces.get(conn)
        if nonces is None:
            nonces = self.nonces[conn] = set()
        for key in keys:
            nonce = key.partition(".")[0]
            if nonce not in nonces:
                nonces.add(nonce)
                self.named_by.setdefault(nonce, set()).add(conn)
                self.gone.pop(nonce, None)  # (a client that dialled again)
                self.lapsed.pop(nonce, None)
                self.spent.pop(nonce, None)

    def ended(self, conn: int) -> list[str]:
        """Connection ``conn`` ended: the nonces no live connection names now (gone);
        a `DIALS_AGAIN` one lapses instead (its values go later: `expired`)."""
        out = []
        for nonce in self.nonces.pop(conn, ()):
            live = self.named_by.get(nonce)
            if live is not None:
                live.discard(conn)
                if live:
                    continue
                del self.named_by[nonce]
            if nonce.endswith(DIALS_AGAIN):
                self._lapse(nonce)
                continue
            self.gone[nonce] = None
            if len(self.gone) > GONE_BOUND:
                self.gone.popitem(last=False)
            out.append(nonce)
        return out

    def is_gone(self, key: str) -> bool:
        """Whether ``key`` is of a session that is gone."""
        return bool(self.gone) and key.partition(".")[0] in self.gone

    def arrived(self, key: str) -> None:
        """``key``'s value came, to wait unclaimed: a lapsed nonce's values wait
        `LAPSE_S` from now (its values gone already: lapsed again)."""
        if self.lapsed or self.spent:
            nonce = key.partition(".")[0]
            if nonce in self.lapsed or nonce in self.spent:
                self.spent.pop(nonce, None)
                self._lapse(nonce)

    def expired(self) -> list[str]:
        """The lapsed nonces whose values are to go now: `LAPSE_S` past their lapse
        and their last value, or pushed out by the bound (`GONE_BOUND`)."""
        out: list[str] = []
        if not self.lapsed:
            return out
        now = self.clock()
        while self.lapsed and (len(self.lapsed) > GONE_BOUND
                               or next(iter(self.lapsed.values())) + LAPSE_S <= now):
            nonce, _ = self.lapsed.popitem(last=False)
            self.spent[nonce] = None
            if len(self.spent) > GONE_BOUND:
                self.spent.popitem(last=False)
            out.append(nonce)
        return out

    def _lapse(self, nonce: str) -> None:
        self.lapsed.pop(nonce, None)
        self.lapsed[nonce] = self.clock()


class Unclaimed:
    """Values no call has taken yet, oldest first: by key, ``(ok, value, bytes
    counted)``, with their bytes (``nbytes``), and their keys by nonce (``by_nonce``,
    each nonce's oldest first; a key with no nonce, no ``.``, is under none), kept in
    step by every change. A mapping's reads by key (``in``, ``len``, iteration); the
    caller holds its own lock."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[bool, Any, int]] = {}
        self.nbytes = 0
        self.by_nonce: dict[str, dict[str, None]] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def add(self, key: str, ok: bool, value: Any, n: int) -> None:
        """Keep ``value`` under ``key`` (not here), counted as ``n`` bytes."""
        self.values[key] = (ok, value, n)
        self.nbytes += n
        nonce, dot, _ = key.partition(".")
        if dot:
            self.by_nonce.setdefault(nonce, {})[key] = None

    def pop(self, key: str) -> tuple[bool, Any, int] | None:
        """``key``'s entry, no longer kept (None if it was not)."""
        got = self.values.pop(key, None)
        if got is not None:
            self.nbytes -= got[2]
            nonce, dot, _ = key.partition(".")
            if dot:
                keys = self.by_nonce[nonce]
                del keys[key]
                if not keys:
                    del self.by_nonce[nonce]
        return got

    def oldest(self) -> str:
        return next(iter(self.values))

    def forget(self, nonce: str) -> list[str]:
        """The keys of ``nonce``'s values, oldest first, no longer kept."""
        keys = list(self.by_nonce.pop(nonce, ()))
        for key in keys:
            self.nbytes -= self.values.pop(key)[2]
        return keys
