"""What a migration condition compares a replica's ``load`` with (config/replication.py):
a whole number, or global load information::

    bound := int | [number "*"] name [("+" | "-") int]
    name  := "mean" | "min" | "max" | "total" | "peer"

``load>=10``, ``load<mean``, ``load>2*peer+1``, ``load<=min``. The factor is more than 0
(``1.5*mean``); the offset is a whole number. What each name stands for is computed when
migration decides (client/policies/migration.py, `load_names`).
"""

from __future__ import annotations

import re

from polybus.config.model import LOAD_NAMES
from polybus.config.problems import closest

__all__ = ["CONDITION_FORMS", "BoundError", "read_bound"]

CONDITION_FORMS = ("a condition compares load with a whole number or a load name ("
                   + ", ".join(LOAD_NAMES) + "), optionally K* before the name and +N or "
                   "-N after it: oc=(load>=10), uc=(load<mean), oc=(load>2*peer+1)")

_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_INT = re.compile(r"\s*([0-9]+)")
_WORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")
_SIGN = re.compile(r"\s*([+\-])")
_STAR = re.compile(r"\s*\*")
_NAMES = ", ".join(LOAD_NAMES)


class BoundError(ValueError):
    """A mistake at ``pos`` (0-based, in the whole replication string)."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def _expected(text: str, pos: int, what: str) -> BoundError:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    found = repr(text[pos]) if pos < len(text) else "end of text"
    return BoundError(f"expected {what}, found {found}", pos)


def _name(text: str, pos: int, expected: str) -> tuple[str, int]:
    m = _WORD.match(text, pos)
    if m is None:
        raise _expected(text, pos, expected)
    word = m.group(1)
    if word not in LOAD_NAMES:
        near = closest(word, LOAD_NAMES)
        said = f"did you mean {near!r}?" if near is not None else f"one of {_NAMES}"
        raise BoundError(f"unknown load name {word!r} ({said})", m.start(1))
    return word, m.end()


def _offset(text: str, pos: int, name: str) -> tuple[int, int]:
    """``+N`` or ``-N`` after load name ``name`` (or nothing: 0), and the position
    after it."""
    m = _SIGN.match(text, pos)
    if m is None:
        return 0, pos
    sign = m.group(1)
    n = _INT.match(text, m.end())
    if n is None:
        raise _expected(text, m.end(), f"a whole number after {sign!r}")
    number = _NUMBER.match(text, m.end())
    if number is not None and number.end() > n.end():  # ("mean+1.5")
        raise BoundError(f"the offset after the name is a whole number, not "
                         f"{number.group(1)} (only a factor, before the name, has a fraction: "
                         f"{number.group(1)}*{name})", number.start(1))
    again = _SIGN.match(text, n.end())
    if again is not None:
        raise BoundError("one '+N' or '-N' after the name: write their sum", again.start(1))
    return (int(n.group(1)) if sign == "+" else -int(n.group(1))), n.end()


def read_bound(text: str, pos: int) -> tuple[int, str | None, float, int]:
    """The bound at ``pos`` of ``text``: ``(value, name, factor, end)``, ``name`` None
    for a whole number ``value``; raises BoundError."""
    m = _NUMBER.match(text, pos)
    if m is None:
        name, end = _name(text, pos, f"a whole number or a load name ({_NAMES})")
        star = _STAR.match(text, end)
        if star is not None:
            raise BoundError(f"the factor goes before the name, as in 2*{name}",
                             star.end() - 1)
        value, end = _offset(text, end, name)
        return value, name, 1.0, end
    number = m.group(1)
    star = _STAR.match(text, m.end())
    if star is not None:
        if float(number) <= 0:
            raise BoundError(f"factor {number} is not more than 0", m.start(1))
        name, end = _name(text, star.end(), f"a load name ({_NAMES}) after '{number}*'")
        value, end = _offset(text, end, name)
        return value, name, float(number), end
    if not number.isdigit():
        raise BoundError(f"{number} is not a whole number (a factor is followed by '*' and "
                         "a load name)", m.start(1))
    sign = _SIGN.match(text, m.end())
    if sign is not None:
        raise BoundError("'+' and '-' follow a load name (mean+2), not a number: write "
                         "the whole number itself", sign.start(1))
    return int(number), None, 1.0, m.end()
