"""A promise outlives its run: what it does once its session is closed.

A run that ends with calls still unanswered (its program raised, or its time limit
stopped it: a run that ends well first takes in every answer, drain.py) closes their
connections, and the replicas it started stop. A promise of such a call, kept past the
run (in a global, say) and used later, can never have its answer: `close` makes its
session's reactor say so, in the reads a promise makes (`wait`, `Promise.done`'s look,
as_completed's read, a forwarded value's fetch), with no cost to the calls of a live
run. A wait raises `StalePromiseError` naming the call; `done` stays False. A promise
answered before its run ended keeps its value, and may be used or passed on later.
A wait already under way in another thread of the program when the session closes
(a sync call's, a promise's) raises it too (`ended_meanwhile`), at its next turn or as
its read finds the closed selector or sockets: those were a raw ValueError out of the
thread, or taken for replicas lost (said as such, and a call run again on another).

A promise passed to a call of another run is never forwarded or held at that run's
client for its answer (the other run's replicas, and even its cluster token, are not
this one's): the call takes its value, waited for through the promise's own session
(`Forwarder.wants`, `Awaiting.wants`, and `wire`'s wait), or its error if that run has
ended (`other_run`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polybus.client.calltext import call_text
from polybus.errors import StalePromiseError

if TYPE_CHECKING:
    from polybus.client.reactor import Reactor

__all__ = ["close", "ended_meanwhile", "stale"]

_USE = ("use the value within its run (polybus.wait it, or use it, before the run's "
        "entrypoint returns or raises)")


def stale(rec: Any) -> StalePromiseError:
    """The error of a use of ``rec``'s promise (a call's record, or an aggregated call's
    Slot) once its run has ended: the call and the replica it was on. Unanswered; or
    answered ``Ref``, its value left on that replica (forwarded to another call), to be
    fetched (fwdfetch.py) from a replica the run has let go."""
    call, where = _named(rec)
    link = rec.link
    what = ("its value stayed on that replica (forwarded to another call) and was not "
            "fetched before the run let it go" if rec.done and link is not None
            else "its answer never came")
    return StalePromiseError(f"this promise belongs to a run that has ended (call {call}"
                             f"{where}); {what}: {_USE}")


def ended_meanwhile(rec: Any) -> StalePromiseError:
    """The error of a wait for ``rec`` (a sync call's, or a promise's) under way in
    another thread of the program when the run ended (its entrypoint returned or
    raised, or the run was stopped): the session closed under it (Reactor._wait)."""
    call, where = _named(rec)
    return StalePromiseError(
        f"the run ended while this thread waited for the answer of call {call}{where}, "
        "which never came: a run takes calls, and reads their answers, while its "
        "entrypoint runs; join the threads that call or wait before it returns")


def _named(rec: Any) -> tuple[str, str]:
    """``rec``'s call as text, and where it was (" of server-0")."""
    from polybus.client.batchcalls import Slot

    if type(rec) is Slot:  # (an aggregated call: its batch's arguments, if still kept)
        batch = rec.batch
        args = batch.args[rec.i] if rec.i < len(batch.args) else None
        call = (call_text(batch.batcher.interface, args, None) if args is not None
                else f"an aggregated call to {batch.batcher.interface}")
    else:
        call = call_text(rec.dispatcher.interface, rec.args or (), rec.kwargs)
    link = rec.link
    return call, f" of {link.name}" if link is not None else ", not yet sent to a replica"


def _ended() -> StalePromiseError:
    return StalePromiseError(f"a promise of a run that has ended was used, its answer "
                             f"never come: {_USE}")


def _wait(rec: Any, timeout: float | None = None) -> Any:
    raise stale(rec)


def _step(prefer: Any = None, timeout: float | None = None) -> None:
    raise _ended()


def _poll(batches: bool = True) -> None:
    """Nothing more will come: `Promise.done` stays False."""


def _request(link: Any, msg: Any, req: int, timeout: float = 5.0) -> Any:
    raise _ended()


def close(reactor: Reactor) -> None:
    """``reactor``'s session is closed (its run ended): from now on its promises' reads
    say so rather than touch the closed sockets (a raw ValueError of a closed epoll
    object or of file descriptor -1 before). Set on the instance, over the gated
    forms too (Reactor.open_gate), so a live reactor's reads pay nothing for it."""
    reactor.closed = True
    for name, fn in (("wait", _wait), ("step", _step), ("poll", _poll),
                     ("request", _request)):
        setattr(reactor, name, fn)
