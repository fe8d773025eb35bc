"""Which argument of a call the codec could not encode, for the error the caller sees.

The codec's TypeError says what value it met, not where: with several arguments, or a
value deep inside one, "a value of type object cannot be sent" leaves the user to guess.
Only after an encoding has failed is each argument encoded alone (with a codec of its
own, the connection's may be in use by another thread), so a call that succeeds pays
nothing for this.

Calls accepted earlier and sent later (held for a busy replica, or waiting in an
async-demand backlog) are encoded when whichever call comes next flushes them: one that
cannot be encoded must fail alone, in its own promise, not in that caller's hands while
the calls sent with it are never answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from polybus.errors import MessageTooLarge, PolybusError, RemoteError, UnsendableError
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Message
from polybus.wire.unencodable import lone_surrogate, reason
from polybus.wire.unsendablepath import at

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.sending import Sending

__all__ = ["named", "not_sent", "refused", "send_accepted", "unwritten"]


def _fails(codec: Codec, interface: str, args: list[Any], kwargs: dict[str, Any] | None) -> bool:
    try:
        codec.encode_parts(Call(0, interface, args, kwargs))
    except (TypeError, OverflowError):
        return True
    except ValueError:  # (too large, say: not this kind of mistake)
        return False
    return False


_SERVING = "set pickle = true on the serving module in the configuration"


def named(interface: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
          exc: Exception, allow_pickle: bool, module: str = "") -> PolybusError:
    """``exc`` (raised encoding a call of ``interface``) as an UnsendableError naming the
    first argument that cannot be encoded: ``f(...) argument 2: ...`` (1 is the first
    positional one) or ``f(...) argument 'key': ...``, and where in it the part that
    cannot be sits, if inside a list, tuple, dict or dataclass: ``f(...) argument 2, at
    [1]['lock']: ...`` (wire/unsendablepath.py). A UnicodeEncodeError (a str with
    a lone surrogate, met by an encoder used without the codec's own translation) is
    said as the codec says it (wire/unencodable.py).

    A remote failure is ``exc`` itself: a failed promise met inside an argument as it
    was encoded raised its call's error, which is a TypeError too when the function
    raised one (errors.RemoteException), and no value of the call's that cannot be sent."""
    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, UnicodeEncodeError):
        exc = lone_surrogate(exc)
    codec = Codec(allow_pickle=allow_pickle)
    where = ""
    for i, a in enumerate(args, 1):
        if _fails(codec, interface, [a], None):
            where = f" argument {i}{at(a, exc, allow_pickle)}"
            break
    else:
        for k, v in (kwargs or {}).items():
            if _fails(codec, interface, [], {k: v}):
                where = f" argument {k!r}{at(v, exc, allow_pickle)}"
                break
    why = reason(exc)
    if module:  # (the key, as check and --set take it)
        why = why.replace(_SERVING, f"set modules.{module}.pickle = true in the configuration")
    return UnsendableError(f"{interface}(...){where}: {why}")


def refused(rec: CallRecord, exc: Exception) -> PolybusError:
    """`named` for a call record whose message could not be encoded for its link."""
    link = rec.link
    pickle = link.channel.codec.allow_pickle if link is not None else False
    links = rec.dispatcher.links
    module = link.module if link is not None else links[0].module if links else ""
    return named(rec.dispatcher.interface, rec.args, rec.kwargs, exc, pickle, module)


def not_sent(rec: CallRecord, exc: Exception) -> Exception:
    """The error for the caller of a call whose message could not be encoded (``exc``:
    TypeError, ValueError or OverflowError; MessageTooLarge is a ValueError), the call
    forgotten first: it was never sent, so nothing is outstanding. A value the codec
    cannot carry (TypeError; OverflowError: an int beyond msgpack's 64 bits; a str with
    a lone surrogate, a UnicodeEncodeError if not the codec's TypeError) is named."""
    rec.dispatcher.forget(rec, sent=False)
    if isinstance(exc, MessageTooLarge):
        return too_large(rec.dispatcher.interface, exc)
    named_as = TypeError | OverflowError | UnicodeEncodeError
    return refused(rec, exc) if isinstance(exc, named_as) else exc


def unwritten(rec: CallRecord, link: ReplicaLink) -> None:
    """``rec``'s send to ``link`` raised something other than an encoding error (a
    RecursionError or MemoryError while encoding, a Ctrl-C), raised on to its caller as
    it is: nothing of it is left counted in flight (the run's end would wait for ever
    for an answer to a call never written), nor held to be written later."""
    if link.held:
        with link.lock:  # (against a write or an ask on another thread: calls.py)
            link.held = [m for m in link.held if m.id != rec.id]
            link.trail = [t for t in link.trail if t[0] is not rec]
    rec.dispatcher.forget(rec, sent=False)


def too_large(interface: str, exc: MessageTooLarge) -> MessageTooLarge:
    """``exc`` naming the interface whose call made the message (it said only how many
    bytes, with no call in sight)."""
    if str(exc).startswith(f"{interface}(...)"):
        return exc
    return MessageTooLarge(f"{interface}(...): the call's {exc}")


def send_accepted(reactor: Sending, link: ReplicaLink, msgs: list[Message]) -> None:
    """``reactor.send_many`` for accepted calls; if it cannot encode them, each is sent
    alone and one that still cannot be fails its record with the reason."""
    try:
        reactor.send_many(link, msgs)
    except (TypeError, ValueError, OverflowError):  # (MessageTooLarge is one)
        for msg in msgs:
            for one in msg.items if type(msg) is Batch else [msg]:
                try:
                    reactor.send_many(link, [one])
                except (TypeError, ValueError, OverflowError) as exc:
                    rec = link.outstanding.get(one.id) if type(one) is Call else None
                    if rec is None:
                        raise  # not a call of ours: as it was
                    rec.set_error(too_large(rec.dispatcher.interface, exc)
                                  if isinstance(exc, MessageTooLarge)
                                  else exc if isinstance(exc, PolybusError) else refused(rec, exc))
                    rec.dispatcher.forget(rec, sent=False)  # (its error first: its consumers get it)
