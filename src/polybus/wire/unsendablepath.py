"""Where, inside a value the codec could not encode, the part it could not carry sits.

The codec's TypeError says what it met ("a value of type lock cannot be sent"), not
where: in a dict of twenty entries, or a list of tuples, the user is left to look. Only
after an encoding has failed is the value walked, each item of a list, tuple, dict or
dataclass encoded alone (with a codec of its own) to find the first that fails, and
then that item's items, so a value that encodes pays nothing for this. The walk is
bounded (`BUDGET` encodings, `DEPTH` steps): past that, the path found so far is said.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from polybus.wire.codec import Codec
from polybus.wire.messages import Result
from polybus.wire.unencodable import TOO_DEEP

__all__ = ["at", "path_in"]

BUDGET = 2000  # items encoded alone at most, over the whole walk
DEPTH = 12     # steps into the value at most (a value nested too deeply is one mistake)
_KEY_MAX = 40  # a dict key longer than this, written, is cut


def _fails(codec: Codec, value: Any) -> bool:
    try:
        codec.encode_parts(Result(0, value))
    except (TypeError, OverflowError):
        return True
    except Exception:  # (too large, say: not this kind of mistake)
        return False
    return False


def _items(value: Any) -> list[tuple[str, Any]] | None:
    """``value``'s items as (step, item), or None if it is not a container walked."""
    if isinstance(value, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return [(f"[{_key(k)}]", v) for k, v in value.items()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{f.name}", getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    return None


def _key(k: Any) -> str:
    text = repr(k)
    return text if len(text) <= _KEY_MAX else text[:_KEY_MAX - 3] + "..."


def path_in(value: Any, allow_pickle: bool) -> str:
    """The path from ``value`` to the first part of it that the codec cannot encode,
    as Python writes it (``['lock']``, ``[2].name``); "" when that is ``value`` itself,
    or nothing inside it is found to fail alone. Never raises."""
    try:
        codec = Codec(allow_pickle=allow_pickle)
        steps: list[str] = []
        budget = BUDGET
        while len(steps) < DEPTH:
            items = _items(value)
            if not items:
                break
            for step, item in items:
                if budget <= 0:
                    return "".join(steps)
                budget -= 1
                if _fails(codec, item):
                    steps.append(step)
                    value = item
                    break
            else:
                break  # (no item fails alone: the container itself is what fails)
        return "".join(steps)
    except Exception:  # (a courtesy to the error it adds to: never one of its own)
        return ""


def at(value: Any, exc: BaseException, allow_pickle: bool, start: str = "") -> str:
    """``, at <start><path>`` for an error message about ``value``, which ``exc`` says
    could not be encoded; "" when no part inside it is found (or ``exc`` is not a value
    the codec cannot carry, or one nested too deeply, where every step fails)."""
    if not isinstance(exc, (TypeError, OverflowError)) or str(exc).startswith(TOO_DEEP):
        return ""
    path = path_in(value, allow_pickle)
    return f", at {start}{path}" if path else ""
