"""Every message of the protocol, as typed, tagged msgspec Structs.

Each encodes as a msgpack array whose first element is the integer tag (docs/protocol.md
lists them). Values inside ``args``/``kwargs``/``value`` may contain msgpack extension
types that refer to the frame's raw buffers (see codec.py).
"""

from __future__ import annotations

from typing import Any

import msgspec

# The last character of a forwarded value's key's nonce (its first part) when its client
# may dial a replica again after taking it for lost: that replica keeps the client's
# values when its connection ends (protocol.md, worker/fwdgone.py).
DIALS_AGAIN = "~"


class _Msg(msgspec.Struct, array_like=True, tag_field="t", omit_defaults=False):
    pass


# -- calls (client <-> worker) -----------------------------------------------------
class Call(_Msg, tag=1):
    id: int
    iface: str
    args: list[Any]
    kwargs: dict[str, Any] | None = None
    prio: float = 0.0            # higher is served first
    deadline: float = 0.0        # seconds the caller will wait; 0 = none
    # The arguments (positions, and keyword names) holding ``Ref("op", key)``s inside a
    # list or map (broadcast handles, client/nested.py): the replica looks into these
    # alone (worker/cache.py). None for every other call, which nothing is looked into.
    inside: list[int | str] | None = None
    # Sent again after a replica that held it was lost (client/calls.py `message`): the
    # replica writes every answer it holds before running it, and writes its answer at
    # once (worker/runtime.py), so that should it end the process too, it takes no
    # finished answer with it. Last, so older peers still decode it (and ignore it).
    again: bool = False


class Result(_Msg, tag=2):
    id: int
    value: Any


class Fail(_Msg, tag=3):
    id: int
    kind: str  # "exception" | "busy" | "no-interface" | "bad-call" | "cache-miss" | "forward-dropped"
    type: str
    message: str
    traceback: str = ""


class Batch(_Msg, tag=4):
    """Several calls, or several answers, in one frame (aggregation)."""

    items: list[Call | Result | Fail]


class CallBatch(_Msg, tag=17):
    """``len(args)`` calls to ``iface`` in one message (aggregation): call i takes the
    positional arguments ``args[i]``; the calls have no ids of their own. The worker
    runs them in order as one queued job and answers one ``BatchResult`` with the same
    ``id``, or one ``Fail`` with that id if it takes none of them."""

    id: int
    iface: str
    args: list[list[Any]]
    prio: float = 0.0


class BatchResult(_Msg, tag=18):
    """The answers of ``CallBatch`` ``id``: ``values[i]`` is call i's value, except for
    the calls listed in ``fails`` (each ``Fail.id`` is the index i in the batch; its
    value slot holds nil)."""

    id: int
    values: list[Any]
    fails: list[Fail] = []


class Put(_Msg, tag=12):
    """Store ``value`` in the replica's operand cache under its content hash ``key``;
    later calls name it by ``Ref("op", key)`` (see worker/cache.py). The entries
    ``keep`` names are made the most recently used first: the other operands of the
    call or batch it is put for, which its eviction must spare."""

    key: str
    value: Any
    keep: list[str] = []


class Drop(_Msg, tag=19):
    """Client -> replica: this connection no longer uses the operands ``keys`` (the
    client's arrays behind them are gone). The replica forgets each one that no other
    live connection uses, so its memory (and, on ``shm``, the sender's segment) is
    free for the next operand at once rather than when the LRU gets to it."""

    keys: list[str]


class Forward(_Msg, tag=13):
    """Client -> producer replica: when call ``id`` (sent on this connection) is answered,
    also send its outcome to the replica at ``to`` as ``Deliver(key, ...)``; the client
    is then answered ``Result(id, Ref("fwd", [delivered keys]))`` instead of the
    value, which the producer keeps under ``pkey`` for a later ``Fetch`` or re-forward
    (see worker/forwarding.py). ``index`` >= 0: call ``index`` of aggregated batch ``id``
    (a ``CallBatch``), whose ``BatchResult`` then holds that ``Ref`` in its slot. With
    ``hold``, the consumer may be moved by migration and need the value again: it stays
    pinned for ``key`` until ``Keep(..., release=True)``."""

    id: int
    pkey: str
    key: str
    to: str
    index: int = -1
    hold: bool = False


class Keep(_Msg, tag=28):
    """Client -> producer replica: when call ``id`` (sent on this connection) is answered,
    keep its value under ``pkey`` for the ``Forward`` of ``key`` that will follow (its
    consumer waits at the client to be placed), and answer the client ``Result(id,
    Ref("fwd", [...]))`` instead of the value. A replica with no room to keep it answers
    by value, as if no ``Keep`` had come (see worker/forwarding.py). With ``release``,
    the consumer of ``key`` ended without being placed (or ended after a ``Forward``
    with ``hold``): what was kept for it goes.
    ``index`` >= 0: call ``index`` of aggregated batch ``id``, as for ``Forward``.
    ``least`` > 0 (``forward = "keep"``, sent before the call itself): kept only if
    the value holds at least ``least`` bytes; a smaller one is answered by value. With
    ``release`` and ``free``, a value no key pins any more goes (not into the store's
    LRU): its promise is gone, or the client has its value, and no consumer needs it."""

    id: int
    pkey: str
    key: str
    release: bool = False
    index: int = -1
    least: int = 0
    free: bool = False


class Deliver(_Msg, tag=14):
    """A forwarded value (or, with ``ok`` false, the upstream failure as [type, message,
    traceback]) for the calls that name ``Ref("fwd", key)`` on the receiving replica."""

    key: str
    ok: bool
    value: Any


class Undelivered(_Msg, tag=27):
    """Producer replica -> client: the ``Deliver`` for ``key`` could not be sent to the
    replica at ``to`` (unreachable, or a value the codec cannot carry), ``type`` and
    ``message`` saying why. The client fails the consumer call waiting there for it."""

    key: str
    to: str
    type: str
    message: str


class Fetch(_Msg, tag=15):
    """Client -> producer replica: send me the forwarded value kept under ``pkey``."""

    pkey: str
    req: int = 0


class Fetched(_Msg, tag=16):
    req: int
    ok: bool
    value: Any


class Cancel(_Msg, tag=5):
    """Client -> worker: forget calls ``ids`` (dropped if still queued, their Forward
    and Keep requests too). ``keys``: forwarded values whose consumer has ended, sent
    to the replicas that gave that consumer back (a ``Steal``): a copy waiting there
    unclaimed goes, and one that comes later is dropped."""

    ids: list[int]
    keys: list[str] = []


class Steal(_Msg, tag=6):
    """Ask a replica to give back up to ``n`` calls still waiting in its queue."""

    n: int
    req: int = 0


class Released(_Msg, tag=7):
    """The calls a replica removed from its queue (a ``Steal``'s or a ``Revoke``'s,
    as ``req`` says); it will never run them."""

    ids: list[int]
    req: int = 0


class Revoke(_Msg, tag=29):
    """Client -> worker: drop each of calls ``ids`` (sent on this connection) that has
    not started: waiting in the queue, or held there for forwarded values. Answered at
    once by ``Released(ids dropped, req)``: those will never run nor be answered, and
    are forgotten whole (their Forward and Keep requests go, the forwarded values they
    took are given back, as a ``Steal``'s are); a call not listed is running, answered,
    or unknown there, and is left as it is (``p.cancel()``: client/cancel.py)."""

    ids: list[int]
    req: int = 0


class StatsRequest(_Msg, tag=8):
    req: int = 0


class Stats(_Msg, tag=9):
    name: str
    calls: int
    busy_s: float
    queue_wait_s: float
    queued: int
    running: int
    speed: float = 1.0
    req: int = 0
    handlers: int = 1  # calls it can run at once (its pool's threads)


class Ping(_Msg, tag=10):
    req: int = 0


class Pong(_Msg, tag=11):
    req: int = 0
    queued: int = 0
    running: int = 0


# -- registry --------------------------------------------------------------------
class Replica(msgspec.Struct, array_like=True):
    name: str
    module: str
    address: str
    interfaces: list[str]
    speed: float = 1.0
    pid: int = 0
    # Every address the replica listens on (``address`` is its main one: its module's
    # transport, or TCP for a worker started by hand); a client picks by scheme. Last,
    # so older records without it still decode.
    addresses: list[str] = []
    # XXH3-64 of the module's source file as the worker read it (usercode.source_digest): a
    # client leaves out a replica of another file registered under its module's key.
    # "" from a worker that says none. Last, as ``addresses``.
    source: str = ""
    # What the replica applies itself, by key relative to its module ("define.f.pool",
    # "queue", "cpus", "speed"...), as canonical text (config/workerside.py `applied`): a
    # client compares it with its own configuration's. Empty from a worker that says
    # none (not compared). Last, as ``source``.
    settings: dict[str, str] = {}


class Register(_Msg, tag=20):
    replica: Replica


class Registered(_Msg, tag=21):
    ok: bool
    reason: str = ""


class Heartbeat(_Msg, tag=22):
    name: str


class Resolve(_Msg, tag=23):
    module: str = ""     # all replicas of a module, or
    interface: str = ""  # all replicas serving an interface
    req: int = 0
    # A client asking for its turn of the name server's rotation: the answer's
    # ``turn`` counts the turns taken before for this module and interface. Last, so
    # older peers still decode it.
    turn: bool = False


class Replicas(_Msg, tag=24):
    replicas: list[Replica]
    req: int = 0
    turn: int = 0  # (the turns taken before this one, when the Resolve asked for one)


class Unregister(_Msg, tag=25):
    name: str


class Goodbye(_Msg, tag=26):
    """The sender is closing this connection on purpose, with a reason."""

    reason: str = ""


Message = (Call | Result | Fail | Batch | CallBatch | BatchResult | Put | Drop | Forward | Keep
           | Deliver | Undelivered | Fetch | Fetched | Cancel
           | Revoke | Steal | Released | StatsRequest | Stats
           | Ping | Pong | Register | Registered | Heartbeat | Resolve | Replicas
           | Unregister | Goodbye)
