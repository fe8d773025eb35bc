"""A call in flight at the client, and the connection to one replica."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from polybus.client.calltext import call_text
from polybus.client.timeoutwhere import where
from polybus.client.unseen import failed, forgotten, raised, seen
from polybus.config.units import duration_text
from polybus.errors import (
    CANCELLED_TYPE,
    UPSTREAM_FAILED,
    BusyError,
    CallTimeoutError,
    NoReplicaError,
    PoisonCallError,
    PolybusError,
    RemoteError,
    RemoteException,
    WorkerDiedError,
)
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Fail, Revoke

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

_PENDING = object()
_NO_ARGS: list[Any] = []


def waited_on(rec: CallRecord) -> bool:
    """Whether ``rec``'s promise was passed to a call (forwarding) that still waits for
    its value: then whether ``rec``'s error reaches the program in that call's is decided
    when that call ends (`Forwarder.answered`), not when ``rec`` fails."""
    if not getattr(rec, "passed", False):
        return False
    f = getattr(rec.dispatcher.comm, "forwarder", None)
    edges = f.edges.get(rec.id) if f is not None else None
    return any(not e.consumer.done for e in edges or ())


def told(owner: object, producer: object) -> None:
    """``producer`` (a call's record, a batch) of ``owner`` (its Dispatcher or Batcher)
    has its outcome, or part of it: calls waiting at the client for its value are looked
    at (client/awaiting.py), if any ever waited for one of ``owner``'s."""
    aw = getattr(owner, "awaited", None)
    if aw is not None:
        aw.answered(producer)


def message_of(error: object) -> str:
    """What a failure says, as a consumer's "upstream call failed" quotes it."""
    return getattr(error, "remote_message", str(error))


class CallRecord:
    """One accepted call: gets exactly one outcome, a value or an error."""

    __slots__ = ("ahead", "args", "attempts", "carried", "deadline", "dispatcher", "error", "id",
                 "inputs", "kwargs", "link", "orphan", "passed", "prio", "reran", "resent",
                 "sent_at", "value")

    # Set when so only (client/unseen.py): its promise went before the outcome came; its
    # promise was passed to another call (forwarded), whose error may say this one's
    # (decided when that call ends: `waited_on`); ``carried``: such a call ended first,
    # failed upstream with this message (its replica heard before this client did), so
    # this call's error, if it has that message, was said.
    orphan: bool
    passed: bool
    carried: str

    resent: bool  # sent again after a cache miss (set then only: operands.Comm.missed)
    reran: bool  # answered, then run again (set then only: `reopen`); never cancelled
    # The producers whose values it was forwarded, each with its value's key, once it
    # answered ``Ref`` (set then only: client/fwdlost.py's `spent`): should it run
    # again, they are connected again. None once it will not (run again, or fetched).
    inputs: list[tuple[CallRecord, str]] | None

    def __init__(self, id: int, dispatcher: Dispatcher, args: list[Any],
                 kwargs: dict[str, Any] | None, prio: float) -> None:
        self.id = id
        self.dispatcher = dispatcher
        self.args = args
        self.kwargs = kwargs
        self.prio = prio
        self.link: ReplicaLink | None = None
        self.value: Any = _PENDING
        self.error: PolybusError | None = None
        self.sent_at = 0.0   # perf_counter() at the last send
        self.ahead = 0       # calls outstanding on its replica then, itself included
        self.attempts = 0
        # Its interface's timeout runs out then (time.monotonic(); 0.0: no timeout;
        # inf while held at the client to be written with the next), counted from when
        # it is written to a replica (Dispatcher._send, refill, Reactor.flush): a wait
        # past it fails it (`give_up`), unless its answer is here by then (`overdue`).
        limit = dispatcher.timeout
        self.deadline = 0.0 if limit is None else time.monotonic() + limit

    @property
    def done(self) -> bool:
        return self.value is not _PENDING or self.error is not None

    def message(self) -> Call:
        if self.attempts > 1:  # sent again after a loss (moves are not counted): marked
            return Call(self.id, self.dispatcher.interface, self.args, self.kwargs, self.prio,
                        again=True)
        return Call(self.id, self.dispatcher.interface, self.args, self.kwargs, self.prio)

    def set_value(self, value: Any) -> bool:
        if self.value is not _PENDING or self.error is not None:  # (done, written out)
            return False  # a late or duplicate answer is discarded
        self.value = value
        if type(value) is not Ref:  # (a forwarded one may yet be re-run: forward.py)
            self.args = _NO_ARGS  # (_let_go, written out: once per answer)
            self.kwargs = None
        return True

    def reopen(self) -> None:
        """Answered ``Ref`` (its value kept on its replica for a next stage), and that
        replica is gone: to be run again (client/forward.py; it kept its arguments)."""
        self.value = _PENDING
        self.reran = True  # (it has run: p.cancel() says False, client/cancel.py)

    def set_error(self, error: PolybusError) -> bool:
        if self.done:
            return False
        self.error = error
        self._let_go()
        failed(error)
        carried = getattr(self, "carried", None)
        if carried is not None and message_of(error) == carried:
            seen(error)  # a consumer's error, come first, said this one's
        elif waited_on(self):
            pass  # decided when that consumer ends (Forwarder.answered)
        elif getattr(self, "orphan", False):  # no promise left to raise it: said
            forgotten(error, self.dispatcher.interface, getattr(self, "passed", False))
        told(self.dispatcher, self)
        return True

    def _let_go(self) -> None:
        # Answered: never sent again, so the arguments need not live as long as the
        # promise (a program that keeps its promises, or only the last one, would pin
        # every argument: a cached operand's array then lives on, and is dropped at its
        # replica (client/operands.py) a round late).
        self.args = _NO_ARGS
        self.kwargs = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise raised(self.error)
        if type(self.value) is Ref:  # forwarded to a next stage: the value stayed there
            from polybus.client.fwdfetch import fetch

            self.value = fetch(self)
            inputs = getattr(self, "inputs", None)
            if inputs:  # (here now: it is not run again for it, client/fwdlost.py)
                inputs.clear()
                self.inputs = None
        return self.value


class Timed(Protocol):
    """What `overdue` reads: a call's record, or a batch (client/batchcalls.py)."""

    @property
    def link(self) -> ReplicaLink | None: ...
    @property
    def deadline(self) -> float: ...


def overdue(rec: Timed, now: float) -> bool:
    """Past its deadline at ``now`` (time.monotonic()). Only a call written to a live
    replica counts: one waiting at the client (a demand backlog, held to be written with
    the next, put back after its replica was lost) has not begun its count, and begins
    it again when written."""
    link = rec.link
    return bool(rec.deadline) and link is not None and not link.dead and now >= rec.deadline


def expire(rec: CallRecord, limit: float | None, now: float, poll: Callable[[], None]) -> None:
    """`as_completed`'s look at one unanswered call: past its deadline at ``now``, what
    has arrived is taken (``poll``), then, if it is still overdue, it is given up on."""
    if limit is None or rec.done or not overdue(rec, now):
        return
    poll()
    if not rec.done and overdue(rec, time.monotonic()):
        # (failed, not raised here: the program sees it when it uses the promise, and
        # one it drops is said, client/unseen.py; the message names the real limit)
        give_up(rec, limit)


def give_up(rec: CallRecord, limit: float, why: str = "") -> bool:
    """Fail ``rec`` with CallTimeoutError for its interface's ``limit`` (seconds) and
    let it go (its late answer is dropped); False if it already had its outcome. ``why``
    is added to the message. One place for a wait, `as_completed` and the run's drain.

    A call written to a live replica is revoked there (`abandon`)."""
    iface = rec.dispatcher.interface
    text = f"no answer from {iface} within {duration_text(limit)}{where(rec)}{why}"
    link = rec.link
    if not rec.set_error(CallTimeoutError(text, interface=iface, call=text_of(rec),
                                          replica=link.name if link is not None else "")):
        return False
    abandon(rec)
    return True


def abandon(rec: CallRecord) -> None:
    """``rec``, failed (its timeout passed), is let go by its dispatcher (`forget`), and
    if it was written to a live replica, that replica is asked to drop it unless it has
    started (``Revoke``): a call still queued there never runs, and the calls behind it
    go on. Nobody waits for the answer: a ``Released`` naming the call frees its place
    there at once (client/answers.py, `late`), as its late answer would; one the replica
    is running (or has run) runs on, and its answer, dropped, frees it when it comes.
    ``req`` 0: no one waits for that answer by name (as for a liveness Ping's Pong).
    The Revoke never waits for room in the connection (a replica that does not read, its
    queue full): what it cannot write now goes with the next write, and the timeout
    returns on time."""
    link = rec.link
    d = rec.dispatcher
    d.forget(rec)
    if link is not None and not link.dead and rec.id in link.abandoned:
        d.reactor.send_unwaited(link, Revoke([rec.id], 0))  # (never waits for room)


def text_of(rec: object) -> str:
    """The call ``rec`` stands for as an error names it (`call_text`): a CallRecord's, by
    the arguments it keeps until answered; "" for an aggregated call's Slot or a batch's
    Pending, which keep no one call's arguments (the batch lets them go)."""
    if not isinstance(rec, CallRecord):
        return ""
    return call_text(rec.dispatcher.interface, rec.args, rec.kwargs)


def waiting_for(rec: CallRecord) -> str:
    """What a wait cut short by Ctrl-C or SIGTERM was for, said after "interrupted":
    the call's interface and where it stood (sent to a replica and how long ago, or
    still at the client)."""
    iface = rec.dispatcher.interface
    link = rec.link
    if link is None:
        return (f"it was waiting for a call to {iface} not yet sent: held at the client "
                "for a replica with room (async-demand) or for its promises' values")
    since = (f", {time.perf_counter() - rec.sent_at:.1f} s after it was sent"
             if rec.sent_at else "")
    return f"it was waiting for a call to {iface} on {link.name}{since}, not yet answered"


def error_from(fail: Fail, interface: str, replica: str, origin: str = "",
               call: str = "") -> PolybusError:
    """The typed error for a Fail message (the one place remote failures are translated);
    ``origin`` names the upstream call a forwarded value came from ("f on server-0");
    ``call``: the failed call as text (`call_text`), kept as the error's ``call``."""
    if fail.kind == "no-interface":
        return NoReplicaError(fail.message)
    if fail.kind == "exception" and fail.type == CANCELLED_TYPE:  # (its input was cancelled)
        from polybus.client.cancel import cancelled_upstream

        return cancelled_upstream(interface, call, fail.message.removeprefix(UPSTREAM_FAILED))
    err: RemoteError
    if fail.kind == "exception":
        err = RemoteException(fail.type, fail.message, fail.traceback,
                              interface=interface, replica=replica, origin=origin)
    elif fail.kind == "busy":
        err = BusyError(fail.message, interface=interface, replica=replica)
    elif fail.kind == "pool-died":  # (a child of its process pool died: worker/procpool.py)
        lost = PoisonCallError if fail.type == PoisonCallError.__name__ else WorkerDiedError
        err = lost(fail.message, interface=interface, replica=replica)
    else:
        err = RemoteError(f"{fail.type}: {fail.message}", interface=interface, replica=replica)
    err.call = call
    return err


class ReplicaLink:
    """The client's connection to one replica and the calls outstanding on it."""

    __slots__ = ("abandoned", "back", "before", "calls", "channel", "dead", "dialling",
                 "held", "lock", "module", "name", "outstanding", "speed", "trail", "unwritten",
                 "watch")

    def __init__(self, name: str, module: str, channel: Channel, speed: float = 1.0,
                 dialling: int = 0) -> None:
        self.name = name
        self.module = module
        self.channel = channel
        self.speed = speed
        self.outstanding: dict[int, CallRecord] = {}
        self.dead = False
        self.calls = 0  # answered calls
        self.held: list[Call] = []  # calls for a busy replica, written together
        # What is asked of held calls (a Forward or Keep of a call's value: fwdbatch.py's
        # `ask`), each with its call, written right after them (sending.py's `flush`)
        self.trail: list[tuple[CallRecord, Callable[[], Any]]] = []
        # Guards what looks at ``held`` and ``trail`` together: a look that a call is
        # held and the addition to ``trail`` (`ask`), against their taking by a write
        # (`flush`) or a call's leaving them (cancel.py, unsendable.py) on another
        # program thread, or a reading one filing an answer (appending to ``held``
        # alone needs it not)
        self.lock = threading.Lock()
        # Calls given up on (their deadline passed) that the replica is still running,
        # each with the dispatcher that made it: their answers are dropped when they
        # come, and till then the replica counts as busy with them when a replica is
        # picked (load, balance.py), and each keeps its place in its dispatcher's count
        # of calls in flight there (async-demand's window: `late`, below).
        self.abandoned: dict[int, Any] = {}
        # Forwards sent it for calls it has answered whose consumers still wait
        # (client/forward.py): one it cannot send on comes back as Undelivered, so it is
        # read meanwhile as if it held calls.
        self.watch = 0
        # The lost link this one took the place of (client/revive.py `install`), for the
        # run's figures: each process that served the run keeps its row (stats.py)
        self.before: ReplicaLink | None = None
        # Dialled in a lost link's place, the first of its replica's connections since
        # that loss: the one whose coming back is said (revive.py `back_line`)
        self.back = False
        # Lost: the ids of the calls and batches placed here that provably never reached
        # the replica whole (client/unwritten.py), placed again whatever their interface
        # (None: none is known, not even those held at the client)
        self.unwritten: frozenset[int] | None = frozenset()
        # Of which dialling of its name (client/lossline.py `LossLines.dialling`): lost
        # after its name was dialled again, it is of a worker whose loss was said
        self.dialling = dialling

    @property
    def load(self) -> int:
        """Calls this client has running or queued on the replica, every interface's,
        those given up on included."""
        return len(self.outstanding) + len(self.abandoned)

    def __repr__(self) -> str:
        return f"<replica {self.name} {len(self.outstanding)} outstanding>"


def late(link: ReplicaLink, cid: int) -> None:
    """The late answer to ``cid``, a call given up on, came from ``link`` (or the
    replica gave it back unrun): the replica is free of it, and the call's place in its
    dispatcher's count there too (`Dispatcher.freed`)."""
    d = link.abandoned.pop(cid, None)
    if d is not None:
        d.freed(link)


def define_key(interface: str, module: str, option: str) -> str:
    """The configuration key of ``interface``'s ``define`` option, as `check` and --set
    take it: a route's HTTP form ("page@http", worker/main.py) is configured as its
    interface ("page"), under its module's table."""
    base = interface.partition("@")[0]
    return f"modules.{module}.define.{base}.{option}" if module else f"define.{base}.{option}"
