"""A producer's replica died keeping its value for consumers (client/forward.py).

Its value is sent on from the client if the program fetched it; else the producer runs
again (an idempotent interface, as a lost call does) and its edges are connected anew,
or its consumers fail with `gone`'s WorkerDiedError (an aggregated call's always:
client/fwdbatch.py).

A producer that runs again may itself be a consumer: ``k`` in ``g(k(f(x)))``, whose
arguments name f's value (``Ref("fwd", key)``, or inside a list: ``g(k([f(x)]))``). Its edges from its own producers are
done when it answers; answered ``Ref``, it keeps them (`spent`), and `rerun` connects
them again, each under a new key, as it is placed again: f's value is sent again from
the replica that keeps it, or from the client, or f runs again in turn (f not
idempotent: k fails naming f's replica, and its consumers with it). (Without them k
was held on its new replica for a value nothing would send, and g, waiting for k, with
it: a 3-stage pipeline on 2 replicas never ended when one was killed.)

So a call keeps its producers, and they theirs, as far back as values were forwarded:
a program that chains forwarded calls for ever (``x = step(x)``, never using ``x``)
would keep every one. `Lineage` bounds that: only the last LINEAGE_CALLS calls to
answer ``Ref`` keep their inputs, and at most LINEAGE_BYTES of the arguments they and
their producers were sent by value; an older one whose value is lost is not run again
(it cannot be sent its inputs), and its consumers fail with a WorkerDiedError saying so.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from polybus.client.fwdbatch import EntryRecord
from polybus.client.fwdedge import Edge
from polybus.client.nested import Nested
from polybus.errors import WorkerDiedError
from polybus.wire.codec import Ref
from polybus.wire.values import OutOfBand, size_of
from polybus.worker.heldvalue import held_bytes

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord
    from polybus.client.forward import Forwarder

__all__ = ["LINEAGE_BYTES", "LINEAGE_CALLS", "Inputs", "Lineage", "gone", "kept_lost",
           "may_run_again", "rerun", "runnable", "spent"]

LINEAGE_CALLS = 10_000  # calls answered Ref that keep their inputs, at most
LINEAGE_BYTES = 64 << 20  # arguments (sent by value) kept so, at most


def kept_lost(f: Forwarder, p: CallRecord, edges: list[Edge]) -> None:
    """``p``'s replica died keeping its value for ``edges`` (consumers unplaced, or
    to be sent it from there: `_instruct`, which may not have been): sent on from
    here if the program has fetched it; else ``p`` runs again (idempotent, as a lost
    call does, with its own inputs: `runnable`) and its edges are connected anew, or
    they fail (WorkerDiedError)."""
    for e in edges:
        e.unwatch()
        e.kept, e.told = False, None
    if not edges or type(p.value) is not Ref:
        for e in edges:
            f._connect(e)  # (a consumer still unplaced: when it is)
    elif may_run_again(p):
        rerun(f, p)
    else:
        for e in edges:
            f._fail(e, gone(p))  # (a consumer still unplaced: when it is, _instruct)


def gone(p: CallRecord) -> WorkerDiedError:
    """The error of a consumer whose value was kept on a replica that died."""
    name = p.link.name if p.link is not None else ""
    why = "" if not p.dispatcher.idempotent or runnable(p) else (
        f"; it is not run again: the values forwarded to it are no longer known (they are "
        f"kept for the last {LINEAGE_CALLS:,} calls answered so, and {LINEAGE_BYTES >> 20} MiB "
        f"of their arguments)")
    return WorkerDiedError(f"the replica holding the result of a call to "
                           f"{p.dispatcher.interface} is gone{f' ({name})' if name else ''}"
                           f"{why}", interface=p.dispatcher.interface, replica=name)


class Inputs(list[tuple["CallRecord", str]]):
    """A call's inputs as `Lineage` keeps them, each its producer and the key its value
    went under: a list it can refer to weakly, so that it keeps no call alive that
    nothing else does (one no one can run again)."""


class Lineage:
    """The inputs (edges from its producers) of each call answered ``Ref`` lately, and
    through them those producers, with theirs: what `rerun` needs. The oldest are let
    go past ``calls`` of them or ``nbytes`` of arguments sent by value (counted until
    they leave, even when their call went first)."""

    def __init__(self, calls: int = LINEAGE_CALLS, nbytes: int = LINEAGE_BYTES) -> None:
        self.calls, self.nbytes = calls, nbytes
        self._kept: deque[tuple[weakref.ref[Inputs], int]] = deque()
        self.bytes = 0
        self.cut = 0  # calls whose inputs were let go for the bounds, ever

    def keep(self, p: CallRecord, edges: Sequence[Edge]) -> None:
        # (each edge's producer and key, not the edge, which names ``p``: no cycle, so
        # the call is freed as soon as the program lets it go, not by the collector)
        inputs = Inputs((e.producer, e.key) for e in edges)
        p.inputs = inputs
        n = _bytes(p) + sum(_bytes(e.producer) for e in edges)
        self._kept.append((weakref.ref(inputs), n))
        self.bytes += n
        while len(self._kept) > self.calls or (self.bytes > self.nbytes and len(self._kept) > 1):
            ref, m = self._kept.popleft()
            self.bytes -= m
            old = ref()
            if old:  # (else its call is gone, or ran again or was fetched since)
                old.clear()  # (its call's `inputs`: it cannot run again now)
                self.cut += 1


def spent(f: Forwarder, p: CallRecord, edges: Sequence[Edge]) -> None:
    """Consumer ``p`` has its outcome and its ``edges`` are done (Forwarder.answered):
    kept on ``p`` (`Lineage`) if its value is a ``Ref``, kept on its replica, whose
    loss runs it again (`rerun`, idempotent). Let go once the program has the value
    (CallRecord.outcome)."""
    if (edges and p.error is None and type(p.value) is Ref and p.dispatcher.idempotent
            and not isinstance(p, EntryRecord)):
        f.lineage.keep(p, edges)


def may_run_again(p: CallRecord) -> bool:
    """Whether ``p``, answered and its value lost with its replica, is run again: an
    idempotent call with attempts left and a replica left, not one of a batch (a
    batch's call is not re-run alone), that can be sent its own inputs (`runnable`).
    (Sent without them, it would name a forwarded value nobody sends, and wait.)"""
    d = p.dispatcher
    return (d.idempotent and p.attempts < d.max_attempts and any(not lk.dead for lk in d.links)
            and not isinstance(p, EntryRecord) and runnable(p))


def runnable(p: CallRecord) -> bool:
    """Whether ``p`` can be sent again: it names no forwarded value, or it kept the
    edges of those it names (`spent`, and not let go since: `Lineage`)."""
    if getattr(p, "inputs", None):
        return True
    return not (any(_forwarded(a) for a in p.args)
                or (p.kwargs and any(_forwarded(v) for v in p.kwargs.values())))


def rerun(f: Forwarder, p: CallRecord) -> None:
    """Run ``p`` again (answered ``Ref``, and its value lost with its replica): its
    edges from its own producers (`spent`) are made again, each under a new key (the
    replicas that saw the old one may count it taken: worker/fwdheld.py), and connected
    when it is placed (Forwarder.placed), as a call's are when it is first sent."""
    p.reopen()
    kept = getattr(p, "inputs", None)
    if kept:
        inputs, p.inputs = list(kept), None
        kept.clear()  # (its entry in the Lineage: counts for nothing now)
        keys: dict[str, Ref] = {}
        edges = []
        for producer, old in inputs:
            e = Edge(producer, p, f"{old.partition('+')[0]}+{p.attempts}")
            keys[old] = Ref("fwd", e.key)
            edges.append(e)
            f.edges.setdefault(producer.id, []).append(e)
        f.deps[p.id] = edges
        p.args = [_renamed(a, keys) for a in p.args]
        if p.kwargs:
            p.kwargs = {k: _renamed(v, keys) for k, v in p.kwargs.items()}
    # Sent once the run again that led here is: its placing connects its edges, whose
    # producers may be lost too and run again in turn, so each would be sent within
    # the last's placing, some frames a stage (a long chain lost together: a
    # RecursionError). Reopened already, so a second edge's look sees it to be placed.
    queue = f.rerunning
    if queue is not None:
        queue.append(p)
        return
    f.rerunning = queue = deque([p])
    try:
        while queue:
            r = queue.popleft()
            r.dispatcher.again(r)
    finally:
        f.rerunning = None


def _forwarded(arg: Any) -> bool:
    """``arg`` names a forwarded value, or holds some (a list, tuple or dict: fwdargs.py)."""
    t = type(arg)
    return (t is Ref and arg.kind == "fwd") or (t is Nested and arg.fwd)


def _renamed(arg: Any, keys: dict[str, Ref]) -> Any:
    """``arg``, a call's argument as sent: a forwarded value's Ref under its new key (in
    a list, tuple or dict too, a copy: client/nested.py)."""
    if type(arg) is Nested:
        return arg.renamed(keys) if arg.fwd else arg
    return keys.get(str(arg.key), arg) if _forwarded(arg) else arg


def _bytes(p: CallRecord) -> int:
    """The bytes of the arguments ``p`` keeps (sent by value; let go once answered by
    value: CallRecord.set_value)."""
    n = sum(_held(a) for a in p.args)
    return n + sum(_held(v) for v in p.kwargs.values()) if p.kwargs else n


def _held(arg: Any) -> int:
    """The bytes an argument holds: large bytes as the call carries them (out of band),
    a container's items with it (worker/heldvalue.py's `held_bytes`), not its wrapper's or
    outer list's few."""
    t = type(arg)
    if t in _NOTHING:  # (the common arguments first: this runs for each of every call's)
        return 0
    if t is Nested:  # (a list, tuple or dict as it travels: what it holds)
        return held_bytes(arg.value)
    return size_of(arg.data) if t is OutOfBand else held_bytes(arg)


# Arguments that hold next to nothing: a forwarded value's Ref (its value is elsewhere),
# numbers, None. (A bound of MiB need not count their few bytes.)
_NOTHING = frozenset({Ref, int, float, bool, type(None)})
