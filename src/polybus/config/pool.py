"""Pool sizes: ``N`` | ``threads:N`` | ``processes:N``, with N from 1 to ``MAX_POOL``.

A replica starts its pool's threads (or processes) when it starts: a typo such as
40000000 hung it making them, or failed with "Python int too large to convert to C int",
so the bound is checked here and said with the value in the message.
"""

from __future__ import annotations

import re
from typing import Literal

from polybus.config.problems import closest
from polybus.config.units import shown
from polybus.errors import ConfigError

__all__ = ["MAX_POOL", "POOL_FORMS", "parse_pool"]

MAX_POOL = 4096
POOL_FORMS = (f"an integer from 1 to {MAX_POOL}, or 'threads:N' / 'processes:N' with N from "
              f"1 to {MAX_POOL}")
KINDS = ("threads", "processes")

_POOL = re.compile(r"^\s*(processes|threads)\s*:\s*([0-9]+)\s*$")
_KIND = re.compile(r"^\s*([A-Za-z_-]+)\s*(?::\s*(.*?))?\s*$")  # (a word where a kind goes)


def parse_pool(value: object) -> tuple[int, Literal["threads", "processes"]]:
    """The size and kind of pool a configuration value names (a bare N: threads);
    ConfigError (no file/key) otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_POOL:
        return value, "threads"
    m = _POOL.match(value) if isinstance(value, str) else None
    if m is not None and 1 <= int(m.group(2)) <= MAX_POOL:
        return int(m.group(2)), "processes" if m.group(1) == "processes" else "threads"
    raise ConfigError(f"expected a pool size, got {shown(value)}", hint=_near(value))


def _near(value: object) -> str:
    """The forms, led by the one ``value`` was likely meant to be (``proceses:2`` ->
    ``processes:2``, ``Threads:4`` -> ``threads:4``, ``process`` -> ``processes:N``)."""
    m = _KIND.match(value) if isinstance(value, str) else None
    if m is None or m.group(1) in KINDS:  # (a kind spelt right: its N is what is wrong)
        return POOL_FORMS
    kind = closest(m.group(1), KINDS)
    if kind is None:
        return POOL_FORMS
    n = m.group(2) or ""
    if not (re.fullmatch(r"[0-9]+", n) and 1 <= int(n) <= MAX_POOL):
        n = "N"
    return f"did you mean '{kind}:{n}'? A pool size is {POOL_FORMS}"
