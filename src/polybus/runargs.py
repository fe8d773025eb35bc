"""What `polybus.run` (and `polybus.serve`) take, checked and put in the form a run uses
(overrides as ``KEY=VALUE`` strings, ``worker_output`` as a stream), and a run's result
as strict JSON (``polybus run --json``). A mistake in an argument is a UsageError before
anything starts."""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from polybus.client.promise import Promise
from polybus.config.overrides import toml_value
from polybus.errors import UsageError, reported_name

__all__ = ["echo_to", "jsonable", "override_strings"]


def jsonable(x: Any) -> Any:
    """A copy of a result that strict JSON can hold: arrays and numpy scalars become
    lists and numbers (their elements made so in turn: an array of dates or objects),
    a float NaN or infinity the string "nan", "inf" or "-inf", anything else its repr
    (bytes too: ``"b'\\xffab'"``, never to be taken for a str result). A promise is its
    value; the types are checked as they are, not as they claim to be: a promise, or a
    proxy, passes ``isinstance(x, int)`` as its answer, and json then failed in
    ``int.__repr__`` with a raw traceback. An object whose repr raises is written as
    what it raised."""
    if isinstance(x, Promise):  # (inside something `wait` does not walk into)
        try:
            x = x.__polybus_value__()
        except Exception as exc:
            return f"<{type(x).__name__}: {reported_name(exc)}: {exc}>"
    t = type(x)
    if x is None or t is str or t is int or t is bool:  # (the common ones first)
        return x
    if t is float or issubclass(t, float):
        return x if math.isfinite(x) else repr(float(x))
    if issubclass(t, int | str):  # (an IntEnum, a str subclass: as json writes them)
        return x
    if hasattr(x, "tolist"):
        x = x.tolist()
        if hasattr(x, "tolist"):  # (an object that only looks like an array)
            return _repr(x)
        return jsonable(x)
    if issubclass(t, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if issubclass(t, list | tuple):
        return [jsonable(v) for v in x]
    return _repr(x)


def _repr(x: Any) -> str:
    try:
        return repr(x)
    except Exception as exc:  # (the program's __repr__: its failure is no reason to lose the run)
        return f"<{type(x).__name__}: repr raised {type(exc).__name__}: {exc}>"


def override_strings(overrides: Mapping[str, Any] | Sequence[str] | str) -> tuple[str, ...]:
    """``KEY=VALUE`` strings (what the engine's workers get as --set) for ``overrides``; a
    mapping's Python values are written as TOML, so each reads back as itself. One str
    is one override (it was taken as a list of its characters, an error for each)."""
    if isinstance(overrides, Mapping):
        return tuple(f"{k}={toml_value(v, k)}" for k, v in overrides.items())
    if isinstance(overrides, str):
        return (overrides,)
    try:
        sets = tuple(overrides)
    except TypeError:
        sets = (overrides,)  # type: ignore[assignment]  # (refused just below)
    for s in sets:
        if not isinstance(s, str):
            raise UsageError(f"overrides: expected a mapping or a list of \"KEY=VALUE\" "
                             f"strings, got {s!r} in {overrides!r} (e.g. "
                             f"{{\"modules.server.replication\": 8}} or "
                             f"[\"modules.server.replication=8\"])")
    return sets


def echo_to(worker_output: bool | TextIO | None) -> TextIO | None:
    """Where ``worker_output`` (`run`'s) sends the workers' lines: True is sys.stderr as
    it is now (a test's capture, say), False (or None) nowhere, else the text stream it is. Anything
    else is a UsageError here, before the run starts: it was an error in the thread that
    forwards the lines ("Exception in thread polybus-worker-output") and then the run's."""
    if worker_output is True:
        return sys.stderr
    if worker_output is False or worker_output is None:
        return None
    why = _not_a_text_stream(worker_output)
    if why:
        raise UsageError(f"worker_output: expected True (sys.stderr), False or None (not "
                         f"forwarded) or a text stream (sys.stdout, a file opened for "
                         f"writing in text mode, io.StringIO()), got {why}")
    return worker_output


def _not_a_text_stream(x: object) -> str:
    """What is wrong with ``x`` as a text stream to write the workers' lines to; "" if
    nothing is."""
    if isinstance(x, io.BufferedIOBase | io.RawIOBase):  # (io.BytesIO, open(f, "wb"))
        return (f"a binary stream ({type(x).__qualname__}), which takes bytes: wrap it in "
                f"io.TextIOWrapper, or open the file in text mode")
    if not callable(getattr(x, "write", None)):
        return repr(x) if isinstance(x, str | int | float) else \
            f"a {type(x).__qualname__} (no write method)"
    writable = getattr(x, "writable", None)
    try:
        if callable(writable) and not writable():
            return f"{x!r}, which is not open for writing"
    except ValueError:  # (a closed file)
        return f"{x!r}, which is closed"
    return ""
