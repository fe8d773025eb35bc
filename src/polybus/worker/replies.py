"""Answers on their way back to clients.

Tiny calls answered while more wait in the queue are held ("corked") and written
together, one write for up to 64 answers; the queue draining, or a thread going idle,
flushes them, and none is held longer than ``CORK_HOLD_S``: the call after a tiny one
may be long (a tiny call's answer waited out the whole 0.6 s call queued behind it).
An answer that cannot be encoded is found and replaced by its own typed failure, so
the others in its write still go.
"""

from __future__ import annotations

import inspect
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from polybus.errors import MessageTooLarge, PolybusError, TransportError
from polybus.lazynumpy import is_plain_array
from polybus.ownfiles import from_user_code, is_polybus_file, to_user_code
from polybus.transport.channel import Channel
from polybus.usernames import format_exception, type_name
from polybus.wire.messages import Batch, Fail, Message, Result
from polybus.wire.undecodable import value_raised
from polybus.wire.unencodable import INT_TOO_LARGE, escaped
from polybus.wire.unsendablepath import at
from polybus.worker import readonly, unread

CORK_LIMIT = 64
CORK_HOLD_S = 0.002  # the longest an answer is held (a poller or the standby writes it)
# An answer whose value carries more bytes than this is not corked (`corkable`): written
# together, such answers saved a system call each, a small part of their copy's cost, and
# made one frame of up to CORK_LIMIT of them that the client had to take whole first.
CORK_BYTES = 64 * 1024
CHILD_TRACEBACK = "polybus_traceback"  # an attribute: pickled with the exception
POOL_DIED = "pool-died"  # the Fail kind of a call its process pool lost (procpool.py)


class PoolDied(Exception):
    """Raised in place of a call's value when the replica's process pool lost the call
    (a child died: procpool.py). Its answer is ``Fail(kind="pool-died")`` whose ``type``
    names the polybus error the client raises: ``WorkerDiedError`` (an interface that
    is not idempotent) or ``PoisonCallError`` (the call's child died while it ran alone)."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error


class ChildException(Exception):
    """Stands in, in a process pool's child, for an exception that would not come back
    whole to the replica (`stand_in`): its type's name, message and traceback, as text.
    (The exception's own unpickling there broke the whole pool: a class whose
    ``__init__`` takes other parameters than its ``args``, a common one.) In the
    replica, for an answer of the pool's that would not unpickle (`unreadable`)."""

    def __init__(self, kind: str, message: str, traceback: str) -> None:
        super().__init__(kind, message, traceback)  # (its args rebuild it, unpickled)


def stand_in(exc: BaseException) -> ChildException | None:
    """In a process pool's child: None if ``exc`` comes back whole through pickle (as
    the pool sends it), else a `ChildException` to send in its place."""
    from multiprocessing.reduction import ForkingPickler

    try:
        pickle.loads(ForkingPickler.dumps(exc))
    except Exception:
        try:
            tb = remote_traceback(exc)
        except Exception:  # (formatting calls the exception's __str__ again)
            tb = ""
        return ChildException(type_name(type(exc)), text_of(exc), tb)
    return None


def remote_traceback(exc: BaseException) -> str:
    """The traceback a client is shown: from the user's function down, and for an error
    of polybus's own (a replica's use()d call) down to the user's line that called
    polybus. A call run in a process pool's child brings the one formatted there
    (procpool.py)."""
    child = getattr(exc, CHILD_TRACEBACK, None)
    if isinstance(child, str):
        return child
    tb = from_user_code(exc.__traceback__)
    if isinstance(exc, PolybusError):  # (polybus's, raised where the user called it)
        tb = to_user_code(tb)
    # ([1:]: without the "Traceback (most recent call last):" header)
    return "".join(format_exception(exc, tb)[1:])


def text_of(exc: BaseException) -> str:
    """``str(exc)``, or what can be said of it when its ``__str__`` itself raises; a lone
    surrogate in it (a message made from a file name that is not UTF-8, say) written
    as ``\\udcff``, so that it can be sent (wire/unencodable.py)."""
    try:
        return escaped(str(exc))
    except BaseException as inner:  # (SystemExit too: a user's class, called here)
        if not value_raised(inner):
            raise
        return f"(its message could not be made: {type(inner).__name__})"


def failure(call_id: int, exc: BaseException, fn: Callable[..., Any] | None = None,
            args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None) -> Fail:
    """The Fail for a call whose function raised ``exc`` (type, message, traceback).

    Given the call (``fn``, ``args``, ``kwargs``), a write refused by a read-only cached
    operand gets a note after its message naming the operand (readonly.py).

    Its text is sendable: a lone surrogate in the type's name, the message or the
    traceback is written as ``\\udcff`` (`escaped`). Sent as it was, the Fail could not
    be encoded, and the client was told the function's *value* could not be sent,
    its exception lost."""
    if isinstance(exc, PoolDied):  # (not the function's: it has no frames to show)
        return Fail(call_id, POOL_DIED, exc.error, text_of(exc), "")
    if isinstance(exc, ChildException):  # (the function's, as text: stand_in)
        kind, message, traceback = exc.args
        return Fail(call_id, "exception", escaped(kind), escaped(message), escaped(traceback))
    qual = type_name(type(exc))  # (server.InputError, as the user knows its module)
    try:
        tb = remote_traceback(exc)
    except BaseException as inner:  # (formatting calls the exception's __str__ again)
        if not value_raised(inner):
            raise
        tb = ""
    message = text_of(exc)
    if fn is not None and isinstance(exc, TypeError) and not hasattr(exc, CHILD_TRACEBACK) \
            and not _user_frames(exc) and (sig := _misfit(fn, args, kwargs)) is not None:
        # The arguments did not fit the function (it never started): its signature says
        # more than a traceback of polybus's own frames, which was all there was.
        tb = ""
        message += f" (the function is {sig})"
    # (Not for a call that failed in a process pool's child: it got pickled copies of
    # the arguments, writable, and ``fn`` here is the pool's ``call(*args, **kwargs)``.)
    if (args or kwargs) and not hasattr(exc, CHILD_TRACEBACK):
        try:
            why = readonly.note(exc, message, fn, args, kwargs)
        except Exception:  # (a note is a courtesy: the call's own error goes regardless)
            why = None
        if why is not None:
            message += f" ({why})"
    return Fail(call_id, "exception", escaped(qual), escaped(message), escaped(tb))


def unsendable_text(exc: BaseException, where: str = "") -> str:
    """What a value the codec cannot carry is said to be, answered or sent on (a
    ``TypeError`` both ways: fwdpeers.py); ``where``: the part of it that cannot be,
    ``", at result['lock']"`` (`unsendablepath.at`), if known."""
    text = INT_TOO_LARGE if isinstance(exc, OverflowError) else text_of(exc)
    return f"the value it returned cannot be sent{where}: {text}"


UNREADABLE = ("the value it returned could not be unpickled in the replica (a process of "
              "its process pool sent it): ")


def unreadable(exc: BaseException) -> ChildException:
    """What a call fails with whose answer, pickled in a process of the replica's
    process pool, does not unpickle in the replica (``exc``: what unpickling raised,
    from a class's ``__reduce__`` or ``__setstate__``, say): that call alone, as a value
    the codec cannot carry fails its own (`unsendable`). Its type is ``exc``'s, its
    message says what failed, then ``exc``'s; the traceback is the user's frames that
    raised it, if any raised it."""
    try:
        tb = remote_traceback(exc) if _user_frames(exc) else ""
    except Exception:  # (formatting calls the exception's __str__ again)
        tb = ""
    return ChildException(type_name(type(exc)), UNREADABLE + text_of(exc), tb)


# The remote type of an answer over the frame limit: what it is (polybus's class for
# it, ``from polybus import MessageTooLarge``; named as a Fetch of a kept value over the
# limit names it, forwarding.py), not the TypeError of a value the codec cannot carry
TOO_LARGE = MessageTooLarge.__name__


def unsendable(call_id: int, exc: BaseException, where: str = "") -> Fail:
    """The Fail for a call whose function returned a value that cannot be sent (``exc``,
    raised encoding it): `TOO_LARGE` over the frame limit, else a ``TypeError`` (a value
    the codec cannot carry); ``where`` as for `unsendable_text`."""
    kind = TOO_LARGE if isinstance(exc, MessageTooLarge) else "TypeError"
    return Fail(call_id, "exception", kind, unsendable_text(exc, where))


# A failure over the frame limit (an exception with a 200 KB message, say) is sent cut to
# fit, never replaced: its type kept, and the head of its message and of its traceback,
# each ending with `CUT`. It was answered "the value it returned cannot be sent", the
# exception lost, and a consumer's answer naming it was dropped (its caller waited for
# ever). `FIT_SLACK` is what it leaves of the frame for its message's other fields, the
# frame's own bytes, and the "an upstream call failed: " a consumer puts before it.
FIT_SLACK = 2048
CUT = " ... ({n} more characters cut: the failure did not fit max_frame)"


def failure_room(limit: int) -> int:
    """The bytes (UTF-8) a failure's texts may take together in a frame of ``limit``."""
    return limit - min(FIT_SLACK, limit // 2)


def cut_failure(texts: Sequence[Any], room: int) -> list[str]:
    """A failure's ``[type, message, traceback]`` (as a ``Deliver`` carries it) within
    about ``room`` bytes of UTF-8 together: the message and the traceback share what the
    type leaves (either takes what the other does not need), each cut from its end with
    `CUT` after what it keeps. The type is kept whole unless past an eighth of it."""
    kind, message, traceback = (str(t) for t in [*texts, "", "", ""][:3])
    kind = _cut(kind, room // 8)
    rest = max(0, room - _size(kind))
    m, t = _size(message), _size(traceback)
    if m + t <= rest:
        return [kind, message, traceback]
    half = rest // 2
    m_room = m if m <= half else rest - t if t <= half else rest - half
    return [kind, _cut(message, m_room), _cut(traceback, rest - m_room)]


def fitted(fail: Fail, room: int) -> Fail:
    """``fail`` with its texts cut to ``room`` bytes (`cut_failure`); ``fail`` itself if
    they fit already."""
    kind, message, traceback = cut_failure([fail.type, fail.message, fail.traceback], room)
    if message is fail.message and traceback is fail.traceback and kind is fail.type:
        return fail
    return Fail(fail.id, fail.kind, kind, message, traceback)


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _cut(text: str, room: int) -> str:
    """``text``, or its head and `CUT` within about ``room`` bytes (the note at least)."""
    if _size(text) <= room:
        return text
    note = len(CUT.format(n=len(text)))  # (at least as long as the note it gets)
    kept = text.encode("utf-8", "surrogatepass")[:max(0, room - note)].decode("utf-8", "ignore")
    return kept + CUT.format(n=len(text) - len(kept))


def internal_failure(worker: str, call_id: int, exc: BaseException) -> Fail:
    """The Fail for a call that polybus's own steps failed to answer (a fault the worker
    logs in full): the call fails alone, and the replica serves on."""
    kind = type(exc)
    return Fail(call_id, "exception", f"{kind.__module__}.{kind.__qualname__}",
                f"worker {worker} failed while answering this call (a fault in polybus, "
                f"logged by the worker): {text_of(exc)}")


def _user_frames(exc: BaseException) -> bool:
    """Whether ``exc``'s traceback has a frame of code that is not polybus's."""
    t = from_user_code(exc.__traceback__)  # (its first such frame, or all of it if none)
    return t is not None and not is_polybus_file(t.tb_frame.f_code.co_filename)


def _misfit(fn: Callable[..., Any], args: Sequence[Any],
            kwargs: dict[str, Any] | None) -> str | None:
    """``add(a, b)`` when ``args`` and ``kwargs`` do not bind to ``fn``'s signature;
    None when they do (a C function's own TypeError, ``math.sqrt("x")``: not a misfit)
    or it has none to tell."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*args, **(kwargs or {}))
    except TypeError:
        # (a partial or a callable instance has no name: its type's, "partial(x)")
        return f"{getattr(fn, '__name__', type(fn).__name__)}{sig}"
    return None


def send_quietly(ch: Channel, msg: Message) -> None:
    """Send ``msg`` if the client is still there (a gone client is the poller's business),
    never waiting for it to read (unread.py). A ``Fail`` over the frame limit is sent cut
    to fit (`fitted`): a failure that `write` cannot send comes here, and so do those
    not sent with it (a consumer's, naming its upstream failure: worker/fwdheld.py).
    (A batch's are cut in worker/batching.py, a forwarded one's in worker/fwdpeers.py.)"""
    try:
        unread.send(ch, msg)
    except MessageTooLarge:
        if type(msg) is Fail:
            cut = fitted(msg, failure_room(ch.codec.max_frame))
            try:  # (cut once: one that still does not fit is not sent)
                unread.send(ch, cut)
            except (PolybusError, TypeError, ValueError):
                pass
    except (PolybusError, TypeError, ValueError):
        pass


# What a send raises for an answer that cannot be encoded (rather than for a client
# that is gone, a TransportError): a value the codec cannot carry, one over the frame
# limit (MessageTooLarge is a ValueError), or any other polybus error met while encoding
# it (a promise inside the result whose call failed).
UNSENDABLE = (TypeError, ValueError, OverflowError, RecursionError, PolybusError)


def write(ch: Channel, replies: list[Message]) -> None:
    """Send ``replies`` in one frame (never waiting for the client to read: unread.py);
    one that cannot be encoded fails alone."""
    try:
        unread.send(ch, Batch(replies) if len(replies) > 1 else replies[0])  # type: ignore[arg-type]
    except TransportError:
        pass  # the client is gone; the poller drops its connection
    except Exception:  # (UNSENDABLE, or anything else encoding met: no answer is lost)
        for r in replies:  # find the answer that cannot be encoded; send the rest
            try:
                unread.send(ch, r)
            except TransportError:
                return
            except Exception as exc:  # (a Fail over the frame limit: cut, send_quietly)
                failed = type(r) is Fail and isinstance(exc, MessageTooLarge)
                where = (at(r.value, exc, ch.codec.allow_pickle, "result")
                         if type(r) is Result else "")
                send_quietly(ch, r if failed else unsendable(getattr(r, "id", 0), exc, where))


def corkable(reply: Message) -> bool:
    """Whether ``reply`` is small enough to be corked: not a Result whose value is bytes
    or a plain array of more than `CORK_BYTES` (other values are not sized: a tiny call's
    answer, as a rule)."""
    if type(reply) is not Result:
        return True
    value = reply.value
    t = type(value)
    if t is bytes or t is bytearray:
        return len(value) <= CORK_BYTES
    if t is memoryview or is_plain_array(value):
        return bool(value.nbytes <= CORK_BYTES)
    return True


class Corked:
    """Answers held back per connection, written together, each connection's in the
    order they were held, and none overtaken by a later answer written through `send`.
    Written under the lock that guards them, and let go only once written: another
    thread's later answer on that connection waits until they are on their way (a
    write never waits for a client to read: unread.py)."""

    def __init__(self) -> None:
        self.held: dict[Channel, list[Message]] = {}
        self._lock = threading.Lock()
        self._since = 0.0  # when the oldest answer held was held

    def hold(self, ch: Channel, reply: Message) -> None:
        with self._lock:
            if not self.held:
                self._since = time.monotonic()
            held = self.held.setdefault(ch, [])
            held.append(reply)
            if len(held) >= CORK_LIMIT:
                try:
                    write(ch, held)
                finally:
                    del self.held[ch]

    def send(self, ch: Channel, reply: Message) -> None:
        """Write ``reply`` now, behind the answers held for ``ch`` (in the same write)."""
        if ch not in self.held:  # (the common case: held ones are let go once written)
            write(ch, [reply])
            return
        with self._lock:
            held = self.held.get(ch, [])
            try:
                write(ch, [*held, reply])
            finally:
                self.held.pop(ch, None)

    def until_due(self) -> float:
        """Seconds until what is held must be written (0: now; a day if nothing is)."""
        if not self.held:
            return 86400.0
        return max(0.0, self._since + CORK_HOLD_S - time.monotonic())

    def flush(self, *, every: bool = False) -> None:
        """Write what is held if it has been held ``CORK_HOLD_S`` (``every``: at once)."""
        with self._lock:
            if not every and (not self.held or time.monotonic() < self._since + CORK_HOLD_S):
                return
            try:
                for ch, msgs in self.held.items():
                    write(ch, msgs)
            finally:
                self.held = {}
