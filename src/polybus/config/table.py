"""Typed reads from one TOML table, each mistake reported and the value left out.

`Table` reads a key of one table at its dotted path as the type it must be (a string
among choices, a boolean, an integer from a bound, a sub-table, a parsed size or
duration, a ``HOST:PORT`` address), reporting a value of the wrong type or out of
range to `Problems` and giving None, so the parser carries on with its default
(`pick`) and one pass finds every mistake. Every table's parser reads through it:
schema.py's modules, define and use tables, cluster.py's and serve.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from polybus.config.hostport import MALFORMED, address_fault
from polybus.config.problems import Problems, dotted, nearest
from polybus.config.units import parse_duration, shown
from polybus.errors import ConfigError

__all__ = ["Table", "is_address", "pick"]

T = TypeVar("T")

class Table:
    """Typed reads from one TOML table at a dotted path, reporting to Problems."""

    def __init__(self, table: dict[str, Any], path: tuple[str, ...], problems: Problems) -> None:
        self.t = table
        self.path = path
        self.p = problems

    def key(self, k: str) -> str:
        return dotted(*self.path, k)

    def has(self, k: str) -> bool:
        return k in self.t

    def string(self, k: str, choices: tuple[str, ...] = ()) -> str | None:
        if k not in self.t:
            return None
        v = self.t[k]
        if not isinstance(v, str):  # (with choices, name them: 'prefetch = true' is a guess)
            self.p.wrong_type(f"one of {', '.join(map(repr, choices))}" if choices
                              else "a string", v, self.key(k))
            return None
        if choices and v not in choices:
            self.p.add(f"expected one of {', '.join(map(repr, choices))}, got {v!r}", self.key(k),
                       hint=nearest(v, choices))
            return None
        return v

    def boolean(self, k: str) -> bool | None:
        if k not in self.t:
            return None
        v = self.t[k]
        if not isinstance(v, bool):
            self.p.wrong_type("true or false", v, self.key(k))
            return None
        return v

    def integer(self, k: str, minimum: int) -> int | None:
        if k not in self.t:
            return None
        v = self.t[k]
        if isinstance(v, bool) or not isinstance(v, int):
            self.p.wrong_type(f"an integer >= {minimum}", v, self.key(k))
            return None
        if v < minimum:
            self.p.add(f"expected an integer >= {minimum}, got {v}", self.key(k))
            return None
        return v

    def table(self, k: str) -> dict[str, Any] | None:
        if k not in self.t:
            return None
        v = self.t[k]
        if not isinstance(v, dict):
            self.p.wrong_type("a table", v, self.key(k))
            return None
        return v

    def parsed(self, k: str, parser: Callable[[object], T]) -> T | None:
        if k not in self.t:
            return None
        try:
            return parser(self.t[k])
        except ConfigError as e:
            self.p.add_error(e, self.key(k))
            return None

    def address(self, k: str, what: str, hint: str, lowest_port: int = 1) -> str | None:
        """A ``HOST:PORT`` string (``[v6]:PORT`` too) with ``lowest_port <= PORT <= 65535``."""
        v = self.string(k)
        if v is None:
            return None
        why = address_fault(v, lowest_port)
        if why is not None:
            said = "" if why in (MALFORMED, "port") else f": {why}"
            self.p.add(f"bad {what} address {v!r}{said}", self.key(k), hint)
            return None
        return v

    def positive_duration(self, k: str, most: tuple[float, str] | None = None) -> float | None:
        """A duration > 0, and with ``most`` (seconds, as said) at most that."""
        v = self.parsed(k, parse_duration)
        if v is not None and (v <= 0 or (most is not None and v > most[0])):
            bound = "> 0" if most is None else f"> 0 and at most {most[1]}"
            self.p.add(f"expected a duration {bound}, got {shown(self.t[k])}", self.key(k))
            return None
        return v


def is_address(text: str, lowest_port: int = 1) -> bool:
    """``HOST:PORT`` (``[v6]:PORT`` too) with ``lowest_port <= PORT <= 65535``
    (config/hostport.py)."""
    return address_fault(text, lowest_port) is None


def pick(value: T | None, default: T) -> T:
    return default if value is None else value
