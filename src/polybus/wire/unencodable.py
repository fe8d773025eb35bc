"""What encoding a value the codec cannot carry raises, and text made safe to send.

A failed encoding is said as a TypeError, as for a value of a type the codec does not
take, so every send path handles it one way: a call's argument fails that call alone
as an `UnsendableError` naming the interface and the argument (client/unsendable.py),
and a function's answer fails that call alone, "the value it returned cannot be sent"
(worker/replies.py). Two failures msgspec raises as other exceptions are translated
where the codec catches them (so a value it can encode pays nothing for this):

- a value nested past the encoder's depth (a RecursionError, naming no value), and
- a str with a lone surrogate (a UnicodeEncodeError, a ValueError that named neither
  call nor argument, and slipped past paths that name only TypeErrors): msgpack's str
  is UTF-8, which has no encoding for U+D800..U+DFFF. Such strings are common:
  ``os.listdir`` and ``sys.argv`` give one for a name that is not UTF-8, as does any
  ``bytes.decode(errors="surrogateescape")``. Sending them as str is not possible; as
  bytes it is, and the receiver decodes them back the same way.

A value pickle cannot carry either (a generator, an open file, a lock, a socket, a
lambda, a module) is not told to set ``pickle = true``, which then failed with "cannot
pickle 'generator' object": `unpicklable` knows such values by their type, and
`instead` says what to send in its place. It does not pickle the value to see: that
would copy all of a large one, run its own ``__reduce__`` code (which may block or
raise anything) on an error path, and run again for each part the unsendable-path
walker re-encodes (wire/unsendablepath.py). A value of a kind it does not know keeps
the hint to convert it or set ``pickle = true``.

A function or class of the program's own modules (`of_the_program`: a top-level
``def`` of the client module, passed as a Ray or Dask user passes one) pickles by name
here and never unpickles there: each of the program's modules is imported under a name
of its own (usernames.py), which a replica has only for its own module. Such a value
is refused at the sender, pickle or not, saying what to send in its place.

Text polybus itself sends (a failure's type, message and traceback) may hold one too,
from an exception's message: `escaped` writes it as ``\\udcff``, so the failure is
told rather than lost.
"""

from __future__ import annotations

import io
import socket
import sys
import threading
import types
import weakref
from collections.abc import Iterator
from typing import Any

from polybus.usernames import PREFIX, import_name, key_of

__all__ = ["INT_TOO_LARGE", "TOO_DEEP", "class_of_the_program", "escaped", "instead", "lone_surrogate",
           "not_importable", "of_the_program", "reason", "too_deep", "unencodable",
           "unpicklable"]


# How `too_deep` begins: no path inside such a value is said (wire/unsendablepath.py),
# every step of one would fail
TOO_DEEP = "a value nested too deeply"


def too_deep() -> TypeError:
    """What encoding a value nested past the encoder's depth raises: a TypeError, as for
    any other value the codec cannot carry, so every send path fails that call alone and
    names the argument (or the answer) as it does those; msgspec's own RecursionError
    said neither."""
    return TypeError(f"{TOO_DEEP}: lists, tuples or dicts inside one another "
                     f"more than about {sys.getrecursionlimit()} deep (Python's recursion "
                     f"limit, which the encoder keeps to); flatten it")


def lone_surrogate(exc: UnicodeEncodeError) -> TypeError:
    """What encoding a str that UTF-8 cannot carry raises (``exc``, msgspec's error for
    it): which character, where, and how to send it instead."""
    text, at = exc.object, exc.start
    if not isinstance(text, str) or not 0 <= at < len(text):  # (not from a str: as it was)
        return TypeError(f"a str that cannot be encoded as UTF-8 cannot be sent: {exc}")
    code = ord(text[at])
    how = ("s.encode(errors='surrogateescape'), the bytes it was decoded from (os.fsencode "
           "for a file name; the receiver's os.fsdecode gives the str back)"
           if 0xDC80 <= code <= 0xDCFF else "s.encode(errors='surrogatepass')")
    return TypeError(f"a str with a lone surrogate (U+{code:04X}) at index {at} cannot be "
                     f"sent: a msgpack str is UTF-8, which has no encoding for it; send "
                     f"bytes instead, {how}, or replace the character")


# What an int past msgpack's 64 bits is said to be: msgspec raises OverflowError before
# any hook is asked, so pickle = true does not carry it either
INT_TOO_LARGE = ("an int outside msgpack's 64 bits (from -2**63 to 2**64 - 1) cannot be "
                 "sent, pickle = true or not: send str(n), and int(s) where it arrives")


def reason(exc: BaseException) -> str:
    """The text of ``exc``, raised encoding a value, as the sender's error says it: an
    OverflowError (an int past 64 bits; msgspec said "can't serialize ints < -2**63 or
    > 2**64 - 1", no more) says what to send instead."""
    return INT_TOO_LARGE if isinstance(exc, OverflowError) else str(exc)


def unencodable(exc: RecursionError | UnicodeEncodeError) -> TypeError:
    """The TypeError for an exception msgspec raised encoding a value (codec.py)."""
    return lone_surrogate(exc) if isinstance(exc, UnicodeEncodeError) else too_deep()


# Types pickle refuses whatever they hold: locks, sockets, and what Python keeps of a
# running program (a weak reference, a frame, a traceback, a code object)
_NEVER = (type(threading.Lock()), type(threading.RLock()), socket.socket, weakref.ref,
          types.FrameType, types.TracebackType, types.CodeType)
_HEAP_TYPE = 1 << 9  # (Py_TPFLAGS_HEAPTYPE: a class written in Python, not in C)


def of_the_program(value: Any) -> str:
    """What ``value`` is, "a function of module 'client' (above)", when it is a function
    or class defined at the top level of one of the program's own modules; else ""."""
    if not isinstance(value, (types.FunctionType, type)):
        return ""
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", "")
    if (not isinstance(module, str) or not module.startswith(PREFIX)
            or not isinstance(name, str) or "<" in name):  # (a lambda, a local: below)
        return ""
    kind = "class" if isinstance(value, type) else "function"
    return f"a {kind} of module '{key_of(module)}' ({name})"


def class_of_the_program(value: Any, reduces: bool = True) -> str:
    """Why pickle would not carry ``value`` either, an instance of a class the program
    defines ("a class of module 'client'", "a class defined inside a function"); else
    "". Such an instance pickles by its class's name, which only that module's own
    process can import (one whose class says how it pickles, with a ``__reduce__`` of
    its own, may not; without ``reduces``, as for an enum member, whose ``__reduce_ex__``
    names its class too, it does all the same)."""
    kind = type(value)
    if reduces and any("__reduce__" in vars(k) or "__reduce_ex__" in vars(k)
                       for k in kind.__mro__[:-1]):
        return ""
    qualname = getattr(kind, "__qualname__", "")
    if "<locals>" in qualname:
        return "a class defined inside a function"
    module = getattr(kind, "__module__", None)
    if isinstance(module, str) and module.startswith(PREFIX):
        return f"a class of module '{key_of(module)}'"
    return ""


_FIELDS = ("its fields (a dict, or a @dataclass, which arrives as a dict), or define the "
           "class in a module of its own that both sides import, and pickle = true")
# (where pickle is on, which sends a dataclass as itself: pickling.py)
_FIELDS_PICKLED = ("its fields as a dict, or define the class in a module of its own that "
                   "both sides import")


def not_importable(value: Any, pickled: bool = False) -> str:
    """Who cannot import the class of ``value`` (one `class_of_the_program` names), and
    what to send instead (``pickled``: with pickle on). The side named is the one the
    value goes to: a replica's answer, or a value it sends on, of the module it serves
    goes to the client (or another module's replica), which cannot import that module;
    anything else the client sends goes to a replica, which cannot import the client's."""
    kind = type(value)
    fields = _FIELDS_PICKLED if pickled else _FIELDS
    if "<locals>" in getattr(kind, "__qualname__", ""):
        return f"no other process can import a class defined inside a function; send {fields}"
    key = key_of(kind.__module__)
    if _served_here(kind):
        return (f"the client (or a replica of another module it is sent on to) cannot "
                f"import module '{key}', which defines that class; return {fields}")
    return f"no replica can import module '{key}', which defines that class; send {fields}"


def _served_here(value: Any) -> bool:
    """Whether ``value``'s module (a function's, a class's) is the one this process
    serves as a replica: what it sends of that module goes from the replica, to the
    client or on to another module's replica."""
    stubs = sys.modules.get("polybus.client.stubs")  # (not imported here: an error path)
    phase = getattr(stubs, "_phase", [None])[0]
    return phase is not None and phase[0] == "replica" \
        and import_name(phase[1]) == value.__module__


def unpicklable(value: Any) -> bool:
    """Whether pickle refuses ``value`` too, told by its type alone (the codec's refusal
    only): a generator, an open file, an iterator of a C type with no pickling of its
    own, a module, a lambda or a function defined inside another, a lock, a socket."""
    t = type(value)
    if isinstance(value, (types.GeneratorType, types.ModuleType, *_NEVER)):
        return True
    if isinstance(value, io.IOBase):  # (an in-memory one pickles: its bytes or text)
        return not isinstance(value, (io.BytesIO, io.StringIO))
    if of_the_program(value):
        return True
    if isinstance(value, types.FunctionType):  # (else pickled by name, as pickle does)
        return value.__name__ == "<lambda>" or "<locals>" in value.__qualname__
    return (isinstance(value, Iterator) and not t.__flags__ & _HEAP_TYPE
            and not any("__reduce__" in vars(k) or "__reduce_ex__" in vars(k)
                        for k in t.__mro__[:-1]))


_CHOOSE = ("define it in the served module and pass what chooses it (its name, or its "
           "parameters)")


def _advice(value: Any) -> tuple[str, str]:
    """What ``value``, which pickle cannot carry, is ("" for no kind known), and what to
    send in its place: in a replica, what to return (its answer, or a value it sends on)."""
    send = "return" if _in_replica() else "pass"
    if isinstance(value, types.GeneratorType):
        return "a generator", f"{send} list(...) of it"
    if isinstance(value, io.IOBase):  # (before iterators: a file is one)
        return "an open file", f"{send} its path, or its bytes"
    if isinstance(value, Iterator):
        return "an iterator", f"{send} list(...) of it"
    if isinstance(value, types.ModuleType):
        return "a module", ("import it where it is used" if send == "return" else
                            "import it in the served module")
    if what := of_the_program(value):
        if _served_here(value):  # (a replica's answer: its own module's)
            return what, (f"the client cannot import module '{key_of(value.__module__)}', "
                          f"which defines it; {_LOOK_UP}")
        return what, ("a replica runs only its own module's functions, and cannot import "
                      f"the program's modules; {_CHOOSE}")
    if isinstance(value, types.FunctionType):
        return "a lambda or a function defined inside another", (
            _LOOK_UP if send == "return" else _CHOOSE)
    return "", ("make it where it is used, not on the replica" if send == "return" else
                "make it on the replica")


_LOOK_UP = ("return what chooses it (its name, or its parameters) and look it up where "
            "it is used")


def _in_replica() -> bool:
    """Whether this process is a replica (worker/main.py), whose values sent are answers."""
    stubs = sys.modules.get("polybus.client.stubs")  # (not imported here: an error path)
    phase = getattr(stubs, "_phase", [None])[0]
    return phase is not None and phase[0] == "replica"


def instead(value: Any, pickled: bool = False) -> str:
    """Why ``value``, which pickle cannot carry, cannot be sent, and what to send; with
    ``pickled`` (pickle's own error said first) what to send alone."""
    what, do = _advice(value)
    if pickled:
        return do
    if not what:
        return (f"a value of type {type(value).__qualname__} cannot be sent at all "
                f"(pickle cannot carry it either); {do}")
    return f"{what} cannot be sent: {do}"


def escaped(text: str) -> str:
    """``text``, with any lone surrogate written as ``\\udcff`` (``backslashreplace``)
    so that it can be sent; ``text`` itself when it has none (most text is ASCII: one
    quick look)."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="backslashreplace").decode()
    return text
