"""A dispatcher's calls given up on (their deadline passed): let go, their places kept
at their replicas until their late answers (or a ``Released``) come (client/calls.py,
`give_up` and `abandon`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.fwdown import Keeper
    from polybus.client.reactor import Reactor

__all__ = ["GivingUp"]


class GivingUp:
    """Mixed into Dispatcher: `forget` and `freed`."""

    if TYPE_CHECKING:
        _index: dict[int, int]
        inflight: list[int]
        _backlog: list[Any]
        reactor: Reactor
        comm: Any
        keeper: Keeper | None

        def _cleared(self, rec: CallRecord, i: int) -> None: ...

    def forget(self, rec: CallRecord, sent: bool = True) -> None:
        """A call given up on (its deadline passed): its answer, if it comes, is dropped;
        till then its replica counts as busy with it (``link.abandoned``), and the call
        keeps its place in flight there (``inflight``: under async-demand(N), one of
        the replica's N), until its late answer comes (`freed`) or the replica is lost.
        ``sent`` False: it never left (it could not be encoded), so no answer will
        come. Its forwarding edges are settled (Forwarder.given_up)."""
        link = rec.link
        # Noted as given up on before it leaves the link's calls: an answer read between
        # the two (another thread) then frees its place (calls.late); after, it found
        # neither, and the place stayed taken for the run.
        keep = sent and link is not None and not link.dead and rec.id in link.outstanding
        if keep:
            link.abandoned[rec.id] = self  # type: ignore[union-attr]  # (freed by its answer)
        if link is not None and link.outstanding.pop(rec.id, None) is not None:
            i = self._index[id(link)]
            if not keep:
                self.inflight[i] -= 1
            self._cleared(rec, i)
        elif keep:  # (answered meanwhile, as any call: its place was freed with it)
            link.abandoned.pop(rec.id, None)  # type: ignore[union-attr]
        if (f := getattr(self.comm, "forwarder", None)) is not None:
            f.given_up(rec, sent)
        if self.keeper is not None:
            self.keeper.given_up(rec)

    def freed(self, link: ReplicaLink) -> None:
        """A call given up on, running on ``link``, answered late (or was given back
        unrun): its place there is free for the backlog (placed at the next step)."""
        i = self._index.get(id(link))
        if i is not None and self.inflight[i] > 0:
            self.inflight[i] -= 1
            if self._backlog:
                self.reactor.work_left()
