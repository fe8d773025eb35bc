"""A pickled value this side cannot unpickle: that message fails, the connection stays.

With ``pickle = true`` a well-formed frame from an authenticated peer may still carry a
value this process cannot rebuild, most often an instance of a class defined in a
module only the sender imports (the client's ``__main__``, or the served module itself,
which a worker imports under a name of its own). That is the program's value, not a
broken protocol: the codec decodes the message again with each such value replaced by
an `Undecodable`, and `failed_form` turns it into what fails that one message alone:

    Result        -> Fail(kind "undecodable"): the call fails with the reason
    BatchResult   -> that call's slot in ``fails``; the batch's other answers stand
    Call          -> Refusal(Fail "bad-call"): the replica answers it, runs nothing
    CallBatch     -> RefusedRows: the batch runs but for those calls, each answered
                     "bad-call" in its slot (worker/batching.py)
    Batch         -> each item as above
    Fetched       -> ok=False, with the reason
    Deliver       -> ok=False: the consumer call fails with the reason
    Put           -> Refusal(None): not cached; the call naming it misses and is sent
                     again with its values, which the replica then refuses as above

A message of any other kind has no program values: a pickle in it stays a protocol error.

A value can also fail to decode without pickle: a dict whose key msgpack carries as a map
(a dataclass, a msgspec Struct or a dict as the key) or as a reference (a broadcast
handle), which cannot be a key on this side. The sender's encoder takes it; the decoder
cannot. `salvage` rebuilds such a message field by field, the field that fails as an
`Undecodable`, and it fails as above: the call (or answer) alone, not the connection
and every call on it.

A value nested deep may fail to decode for want of room: msgspec's decoder keeps to
Python's recursion limit counted from where it is called (on 3.12 and later, the C
stack's), and its sender encoded it near the bottom of a thread (a replica's pool
thread) where the reader is deep in a program's own calls. A sync call's answer 990
lists deep was refused as malformed by the client, which dropped the replica. So a
decode that runs out of room is tried again `on_fresh_stack`, with all the room the
sender could have had: only a value deeper than that (a sender whose recursion limit
was raised) is still a protocol error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import msgspec

from polybus.errors import ProtocolError
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Deliver,
    Fail,
    Fetched,
    Put,
    Result,
)

HINT = ("a pickled class must come from a module both sides import (not the program's "
        "__main__ nor the served module itself)")
RAISED_HINT = ("the value's own unpickling code (a __reduce__ or __setstate__) raised it; "
               "it fails this value alone")
KEY_HINT = ("a dict's keys must be str, numbers, bytes, None or tuples of these (a "
            "dataclass, a msgspec Struct or a dict as a key travels as a map, a broadcast "
            "handle as a reference)")


class Unpicklable(ProtocolError):
    """Raised by the codec's decode hook: a value of this message did not unpickle."""


class Undecodable:
    """Stands for a value that did not unpickle (``type``, ``why``: what it raised), or,
    with ``hint`` `KEY_HINT`, one with a dict key that cannot be one here (`salvage`)."""

    __slots__ = ("hint", "type", "verb", "why")

    def __init__(self, exc: BaseException, hint: str = HINT) -> None:
        self.type = type(exc).__name__
        self.why = said_of(exc)
        self.hint = hint
        self.verb = "unpickled" if hint is HINT else "decoded"
        if hint is HINT and not isinstance(exc, Exception):  # (SystemExit, ...: no
            # class missing here, the value's own code raised it on purpose)
            self.why = self.type if self.why == self.type else f"{self.type}: {self.why}"
            self.hint = RAISED_HINT


def said_of(exc: BaseException) -> str:
    """``str(exc)``, or its type's name if that is empty or itself raises (a pickle's
    exception is the sender's class, its ``__str__`` anything)."""
    try:
        return str(exc) or type(exc).__name__
    except BaseException as inner:
        if not value_raised(inner):
            raise
        return type(exc).__name__


class RefusedRows(CallBatch):
    """Not a wire message: a batch some of whose calls did not unpickle, their rows
    emptied and their answers (by index) in ``refused``."""

    refused: dict[int, Fail] = msgspec.field(default_factory=dict)


class Refusal:
    """Not a wire message: a message this side refuses, with the answer it gets (None:
    nothing to answer), the reason, for the log, and the message it came as (`sent_as`)."""

    __slots__ = ("answer", "reason", "sent")
    __match_args__ = ("answer", "reason")

    def __init__(self, answer: Fail | None, reason: str, sent: str = "Call") -> None:
        self.answer = answer
        self.reason = reason
        self.sent = sent


def sent_as(msg: Any) -> str:
    """The name of the wire message ``msg`` came as (protocol.md's): a `Refusal` or
    `RefusedRows`, this side's own classes, as the Call, Put or CallBatch it stands
    for. For a peer told which message it sent that this side does not take."""
    if type(msg) is Refusal:
        return msg.sent
    if isinstance(msg, RefusedRows):
        return CallBatch.__name__
    return type(msg).__name__


def value_raised(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a value's own code as it was unpickled or pickled (a
    class's ``__reduce__`` or ``__setstate__``), fails that value alone. Any exception
    does, SystemExit and KeyboardInterrupt too: a pickle can raise them on purpose, and
    let through they ended the replica's reading thread, the replica alive, registered
    and deaf. In the main thread, only an Exception: Ctrl-C, SIGTERM and a run's
    --timeout arrive there as a KeyboardInterrupt (cli/main.py, deadline.py), and a
    program's own signal handler may call sys.exit() there; both go on. (A replica
    reads in threads of its own, never the main one.)"""
    return isinstance(exc, Exception) or threading.current_thread() is not \
        threading.main_thread()


def on_fresh_stack(decode: Callable[[Any], Any], header: Any) -> Any:
    """``decode(header)`` in a thread of its own, at the bottom of a new stack (see the
    module's docstring); raises what it raises. The caller waits for it."""
    got: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            got.append((True, decode(header)))
        except BaseException as exc:  # (the caller's to raise)
            got.append((False, exc))

    t = threading.Thread(target=run, name="polybus-decode-deep", daemon=True)
    t.start()
    t.join()
    ok, value = got[0]
    if not ok:
        raise value
    return value


def first_bad(value: Any) -> Undecodable | None:
    """The first `Undecodable` in ``value`` (lists, tuples, dict keys and values)."""
    t = type(value)
    if t is Undecodable:
        return value  # type: ignore[no-any-return]
    if t is list or t is tuple:
        for v in value:
            if (bad := first_bad(v)) is not None:
                return bad
    elif t is dict:
        for k, v in value.items():
            if (bad := first_bad(k) or first_bad(v)) is not None:
                return bad
    elif isinstance(value, msgspec.Struct):  # (a Call inside a Batch)
        for f in value.__struct_fields__:
            if (bad := first_bad(getattr(value, f))) is not None:
                return bad
    return None


ANSWER = "its answer could not be {} in the client"
ARGUMENT = "an argument of this call could not be {} on the replica"
FORWARDED = "the forwarded value could not be {}"


def _said(bad: Undecodable, what: str) -> str:
    return f"{what.format(bad.verb)}: {bad.why}; {bad.hint}"


def failed_form(msg: Any) -> Any:
    """``msg`` (decoded with `Undecodable` in place of each value that did not unpickle)
    as the message that fails only what it carried; ProtocolError for a message that
    carries no program values."""
    t = type(msg)
    if t is Batch:
        return Batch([failed_form(m) if first_bad(m) is not None else m for m in msg.items])
    bad = first_bad(msg)
    if bad is None:  # (its bad value was dropped: say so anyway)
        raise ProtocolError(f"a {t.__name__} with a value that did not unpickle")
    if t is Result:
        return Fail(msg.id, "undecodable", bad.type, _said(bad, ANSWER))
    if t is BatchResult:
        fails = list(msg.fails)
        values = list(msg.values)
        for i, v in enumerate(values):
            if (b := first_bad(v)) is not None:
                values[i] = None
                fails.append(Fail(i, "undecodable", b.type, _said(b, ANSWER)))
        return BatchResult(msg.id, values, fails)
    if t is Call:
        why = _said(bad, ARGUMENT)
        return Refusal(Fail(msg.id, "bad-call", bad.type, why), why)
    if t is CallBatch:
        refused = {i: Fail(i, "bad-call", b.type, _said(b, ARGUMENT))
                   for i, row in enumerate(msg.args) if (b := first_bad(row)) is not None}
        return RefusedRows(msg.id, msg.iface, [[] if i in refused else row
                                               for i, row in enumerate(msg.args)],
                           msg.prio, refused)
    if t is Fetched:
        return Fetched(msg.req, False, [bad.type, _said(bad, f"{FORWARDED} in the client")])
    if t is Deliver:
        why = _said(bad, f"{FORWARDED} on the consumer's replica")
        return Deliver(msg.key, False, [bad.type, why, ""])
    if t is Put:
        return Refusal(None, _said(bad, f"operand {msg.key[:12]} could not be {{}} "
                                        "on the replica (not cached)"), "Put")
    raise ProtocolError(f"a pickled value in a {t.__name__}, which carries none")



# Messages that carry program values, by tag, with the fields that hold them (the rest
# are polybus's own, decoded as their types); one call's arguments, or one answer, each
# in the fields `_PER_CALL` names.
_CARRIERS = {c.__struct_config__.tag: c
             for c in (Call, Result, Batch, CallBatch, BatchResult, Put, Deliver, Fetched)}
_VALUES = {"args", "kwargs", "value", "values"}
# What msgspec says of a map key that decodes to something unhashable (a key that went
# as a map: a dataclass, a Struct, a dict; or as a reference): a value of the program's.
UNHASHABLE_KEY = "map keys must be hashable"
_PER_CALL: dict[type[Any], str] = {CallBatch: "args", BatchResult: "values"}
_RAWS = msgspec.msgpack.Decoder(list[msgspec.Raw])
_TAG = msgspec.msgpack.Decoder(int)


def salvage(header: bytes | bytearray | memoryview, typed: Callable[[Any], Any],
            loose: Callable[[Any], Any]) -> Any:
    """``header``, which failed to decode because a dict key in a value cannot be one
    here, as the message that fails what carried that value (or a `Refusal`).
    ``typed`` decodes a whole message, ``loose`` any one value (both with the codec's
    extension hook). ProtocolError if it is not such a message after all."""
    msg = _split(header, typed, loose)  # (it failed to decode whole: not tried again)
    if first_bad(msg) is None:
        raise ProtocolError("malformed message: a value failed to decode, then did not")
    return failed_form(msg)


def _rebuild(raw: Any, typed: Callable[[Any], Any], loose: Callable[[Any], Any]) -> Any:
    """A Batch's item: decoded whole if it can be, else field by field (`_split`)."""
    try:
        return typed(raw)
    except msgspec.DecodeError:
        return _split(raw, typed, loose)


def _split(raw: Any, typed: Callable[[Any], Any], loose: Callable[[Any], Any]) -> Any:
    """A message that did not decode whole, field by field (`salvage`)."""
    try:
        parts = _RAWS.decode(raw)
        cls = _CARRIERS.get(_TAG.decode(parts[0])) if parts else None
        if cls is None:
            raise ProtocolError("malformed message: undecodable values in a message that "
                                "carries none")
        if cls is Batch:  # (each item decodes, or is rebuilt, alone)
            return Batch([_rebuild(item, typed, loose) for item in _RAWS.decode(parts[1])])
        return _fields(cls, parts, loose)
    except msgspec.DecodeError as exc:
        raise ProtocolError(f"malformed message: {exc}") from None


def _fields(cls: type[Any], parts: list[msgspec.Raw], loose: Callable[[Any], Any]) -> Any:
    values: list[Any] = []
    for field, part in zip(msgspec.structs.fields(cls), parts[1:], strict=False):
        if _PER_CALL.get(cls) == field.name:
            values.append([_value(p, loose) for p in _RAWS.decode(part)])
        elif field.name in _VALUES:
            values.append(_value(part, loose))
        else:  # (a ProtocolError's DecodeError if it is not what it must be)
            values.append(msgspec.msgpack.decode(part, type=field.type))
    return cls(*values)


def _value(raw: msgspec.Raw, loose: Callable[[Any], Any]) -> Any:
    try:
        return loose(raw)
    except msgspec.DecodeError as exc:
        if UNHASHABLE_KEY not in str(exc):  # (broken otherwise: not the program's value)
            raise
        return Undecodable(TypeError(f"a dict key arrived as a map or a reference, which "
                                     f"cannot be a key ({exc})"), KEY_HINT)
