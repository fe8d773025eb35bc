"""Call styles: ``sync`` | ``async`` | ``async-demand(N)`` | ``async-demand(auto)``."""

from __future__ import annotations

import re

from polybus.config.model import CallStyle
from polybus.config.problems import nearest
from polybus.errors import ConfigError

__all__ = ["CALLSTYLE_FORMS", "MAX_WINDOW", "parse_callstyle"]

CALLSTYLE_FORMS = "one of 'sync', 'async', 'async-demand(N)' with N >= 1, 'async-demand(auto)'"

# The most calls of a binding outstanding on one replica: a sanity bound, as for
# aggregate's count (a typo of twenty digits was taken, and meant nothing).
MAX_WINDOW = 1_000_000
_DEMAND = re.compile(r"^async-demand\s*\(\s*([^)]*?)\s*\)$")


def parse_callstyle(value: object) -> CallStyle:
    """The CallStyle a configuration string names; ConfigError (no file/key) otherwise."""
    if not isinstance(value, str):
        raise ConfigError(f"expected a call style string, got {value!r}", hint=CALLSTYLE_FORMS)
    text = value.strip()
    if text == "sync":
        return CallStyle("sync")
    if text == "async":
        return CallStyle("async")
    m = _DEMAND.match(text)
    if m is None:
        raise ConfigError(f"unknown call style {value!r}", hint=_near(text))
    window = m.group(1)
    if window == "auto":
        return CallStyle("async-demand", None)
    if not re.fullmatch(r"[0-9]+", window) or int(window) < 1:
        raise ConfigError(f"bad window {window!r} in call style {value!r}: "
                          "expected an integer >= 1 or 'auto'", hint=CALLSTYLE_FORMS)
    if int(window) > MAX_WINDOW:
        raise ConfigError(f"window {window} in call style {value!r} is more than "
                          f"{MAX_WINDOW:,}", hint=f"async-demand(N) with N from 1 to "
                          f"{MAX_WINDOW:,}, or 'async-demand(auto)'")
    return CallStyle("async-demand", int(window))


def _near(text: str) -> str:
    """The forms, led by the one ``text`` was likely meant to be (``asynch`` -> async,
    ``async_demand(4)`` -> async-demand(4))."""
    window = re.search(r"\(([^)]*)\)", text)
    demand = f"async-demand({window.group(1).strip() or 'N'})" if window else "async-demand(N)"
    close = nearest(text, ["sync", "async", demand, "async-demand(auto)"])
    return f"{close} A call style is {CALLSTYLE_FORMS}" if close else CALLSTYLE_FORMS
