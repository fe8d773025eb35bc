"""What a key's value was written as, so a message quotes it so: TOML reads ``1e309``
as infinity, and the checks, which see only the value, quote it ``inf``.

`Written` keeps the text of each value a file's key line or a ``--set KEY=VALUE``
wrote, and of each value inside an inline table written there (``use.f = { linger =
1e309 }``: ``use.f.linger``'s is ``1e309``); `Written.as_written` puts that text back in
a message about the key, for a number or an array of numbers that holds an infinity.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from polybus.config.origin import Origin
from polybus.config.overrides import normalised, parse_key_path
from polybus.config.problems import dotted
from polybus.errors import ConfigError

__all__ = ["Written", "set_as_written"]

# Strings (basic and literal), the inline tables' and arrays' punctuation, and the rest
# (bare keys, numbers, words) up to them or a space.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|[{}\[\],=.]|[^\s{}\[\],=."\']+'
                    r'(?:\.[0-9][^\s{}\[\],="\']*)?')


class Written:
    """The text each dotted key's value was written as (the first one, as a file's
    checks see it, or the last, as overrides apply: ``last``)."""

    def __init__(self, last: bool = False) -> None:
        self.values: dict[str, str] = {}
        self._last = last

    def add(self, parts: list[str], raw: str) -> None:
        """The value of the key ``parts`` was written as ``raw`` (after its ``=``)."""
        raw = raw.strip()
        for sub, text in [((), raw), *_inline(raw)]:
            key = dotted(*parts, *sub)
            if self._last:
                self.values[key] = text
            else:
                self.values.setdefault(key, text)

    def as_written(self, key: str | None, message: str) -> str:
        """``message`` (of the mistake at ``key``) with a number TOML read as infinity
        (``1e309``, or an array of numbers holding one) quoted as it was written, not as
        ``inf``."""
        raw = self.values.get(key or "")
        if raw is None or "inf" in raw:  # (inf written as such is quoted as written)
            return message
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except (tomllib.TOMLDecodeError, RecursionError):
            return message
        if not _infinite(value) or not isinstance(value, float | list):
            return message
        written = raw.partition("#")[0].strip()  # (numbers only: no '#' in a string)
        if isinstance(value, list) and not all(isinstance(v, int | float) for v in value):
            return message
        quoted = re.escape(repr(value))
        return re.sub(rf"(?<![\w.]){quoted}(?![\w.])", lambda _: written, message, count=1)


def _infinite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isinf(value)
    return isinstance(value, list) and any(_infinite(v) for v in value)


def _inline(raw: str) -> list[tuple[tuple[str, ...], str]]:
    """(the dotted parts inside it, text) of each value of the inline table ``raw`` (and
    of those nested in it); none if ``raw`` is no inline table of one line."""
    if not raw.startswith("{"):
        return []
    tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(raw)]
    out: list[tuple[tuple[str, ...], str]] = []
    try:
        _table(raw, tokens, 0, (), out)
    except (IndexError, ValueError, tomllib.TOMLDecodeError):
        return []
    return out


def _table(raw: str, tokens: list[tuple[str, int, int]], i: int, prefix: tuple[str, ...],
           out: list[tuple[tuple[str, ...], str]]) -> int:
    """Read the inline table whose ``{`` is token ``i``; the index past its ``}``."""
    i += 1
    while tokens[i][0] != "}":
        parts: list[str] = []
        while tokens[i][0] != "=":
            if tokens[i][0] != ".":
                parts.append(_key(tokens[i][0]))
            i += 1
        i += 1
        path = (*prefix, *parts)
        start = tokens[i][1]
        if tokens[i][0] == "{":
            i = _table(raw, tokens, i, path, out)
        elif tokens[i][0] == "[":
            i = _array_end(tokens, i)
        else:
            i += 1
        out.append((path, raw[start:tokens[i - 1][2]]))
        if tokens[i][0] == ",":
            i += 1
    return i + 1


def _array_end(tokens: list[tuple[str, int, int]], i: int) -> int:
    """The index past the ``]`` that closes the array whose ``[`` is token ``i``."""
    depth = 0
    while True:
        t = tokens[i][0]
        depth += (t in "[{") - (t in "]}") if len(t) == 1 else 0
        i += 1
        if depth == 0:
            return i


def _key(token: str) -> str:
    if token[:1] in ("'", '"'):
        return str(tomllib.loads(f"k = {token}")["k"])
    if not re.fullmatch(r"[A-Za-z0-9_-]+", token):
        raise ValueError(token)
    return token


def set_as_written(errors: list[ConfigError], overrides: object,
                   origin: Origin) -> list[ConfigError]:
    """``errors`` with those of ``overrides`` given as ``KEY=VALUE`` text (``--set``)
    quoting an infinity as the text wrote it (`Written.as_written`); a mapping's values
    (from Python) were written as no text."""
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, Mapping) or not isinstance(overrides, Iterable) \
            or not any(e.file == origin.label for e in errors):
        return errors
    written = Written(last=True)  # (as they apply: the last of a key is taken)
    for text in overrides:
        if not isinstance(text, str):
            continue
        key, _, value = text.partition("=")
        try:
            written.add(normalised(parse_key_path(key.strip(), origin)), value)
        except ConfigError:
            continue
    return [ConfigError(written.as_written(e.key, e.bare_message), file=e.file, key=e.key,
                        hint=e.hint, line=e.line) if e.file == origin.label else e
            for e in errors]
