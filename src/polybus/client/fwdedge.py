"""An edge between two calls (client/forward.py): a producer whose promise was passed
to a consumer, its value to go replica to replica, and the link read for word of it
(`Edge.watch`); and which promises are worth one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.batchcalls import BatchPromise
from polybus.client.fwdbatch import unsent
from polybus.client.promise import CallPromise
from polybus.wire.codec import Ref

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.dispatch import Dispatcher
    from polybus.client.reactor import Reactor

__all__ = ["Edge", "edge_of", "pickles_for", "run_of", "unsent_value"]


class Edge:
    __slots__ = ("asked", "consumer", "failed", "hold", "kept", "key", "left", "pinned",
                 "producer", "to", "told", "watched")

    def __init__(self, producer: CallRecord, consumer: CallRecord, key: str) -> None:
        producer.passed = True  # its error reaches the program as the consumer's (calls.py)
        self.producer = producer
        self.consumer = consumer
        self.key = key
        self.to: ReplicaLink | None = None  # where the consumer was placed last
        self.failed = ""  # the message of the failure the client sent ``to`` for it
        self.watched: ReplicaLink | None = None  # whose ``watch`` counts it
        self.asked = False  # a Forward or Keep went for it while its producer was unanswered
        self.kept = False  # a Keep went for it: its producer's replica pins the value for it
        # Its consumer may be given back by a Steal (migration) and placed again, needing
        # the value again: its Forwards ask that the value stay pinned (``hold``) till it
        # ends (``pinned``: one went; fwdmove.py).
        self.hold = consumer.dispatcher.keep_args
        self.pinned = False
        # (producer's link, consumer's) of the Forward that went while it was unanswered
        self.told: tuple[ReplicaLink, ReplicaLink] | None = None
        # The replicas that gave its consumer back (a Steal): told when it ends (fwdmove.py)
        self.left: list[ReplicaLink] | None = None

    def watch(self, link: ReplicaLink) -> None:
        """Counted, once, in ``link``'s ``watch``: its producer's replica sends the value
        on from its store, and is read for an Undelivered about it (forward.py)."""
        if self.watched is None:
            self.watched = link
            link.watch += 1

    def unwatch(self) -> None:
        """No longer counted in the ``watch`` of the link it was (`watch`)."""
        if self.watched is not None:
            self.watched.watch -= 1
            self.watched = None


def edge_of(deps: dict[int, list[Edge]], nonce: str, key: str) -> Edge | None:
    """The edge among ``deps`` (consumer call id -> its edges) of a session whose nonce is
    ``nonce`` whose key is ``key``: "nonce.consumer id.index", with "+n" after it once
    its consumer ran again (client/fwdlost.py's `rerun`)."""
    head, _, rest = key.partition(".")
    cid, _, index = rest.partition(".")
    if head != nonce:
        return None
    try:
        e = deps.get(int(cid), [])[int(index.partition("+")[0])]
    except (ValueError, IndexError):
        return None
    return e if e.key == key else None


def unsent_value(value: Any) -> bool:
    """A promise whose value is not at the client: unanswered (of a binding whose
    answers may be forwarded), or forwarded. An aggregated call's too (fwdbatch.py)."""
    if type(value) is not CallPromise:
        return type(value) is BatchPromise and unsent(value)
    rec: CallRecord = value._rec
    if not rec.done:
        return rec.dispatcher.forwards_answers
    return rec.error is None and type(rec.value) is Ref


def run_of(p: CallPromise | BatchPromise) -> Reactor:
    """The reactor of the session (the run) that made promise ``p``'s call: a promise of
    another run passed to a call is neither forwarded nor held for (client/ended.py)."""
    return p._reactor if type(p) is CallPromise else p._rec.batcher.reactor


def pickles_for(p: CallPromise | BatchPromise, d: Dispatcher) -> bool:
    """Whether promise ``p``'s replica, of a module with pickle on, would send its value
    pickled to ``d``'s, which has pickle off and refuses any pickled value: a datetime
    or a dataclass (wire/pickling.py), an object. Such a value is not sent replica to
    replica but through the client (awaiting.py), which sends it as ``d``'s
    codec carries it (converted, or refused there saying why), as with forward off."""
    if d.pickle:
        return False
    producer = p._rec.dispatcher if type(p) is CallPromise else p._rec.batcher.d
    return producer.pickle
