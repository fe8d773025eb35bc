"""Collecting configuration mistakes: every check reports here, nothing stops at the first.

Also the small helpers every checker shares: dotted key paths, "did you mean" hints and
the one-line description of a value of the wrong type.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from typing import Any

from polybus.config.foreign import foreign_hint
from polybus.config.milfile import MilFile
from polybus.config.origin import SET, Origin, written_by
from polybus.errors import ConfigError
from polybus.plural import with_article

__all__ = ["ConfigErrors", "Problems", "closest", "describe", "dotted", "names_array",
           "names_hint", "nearest", "rekey"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class ConfigErrors(ConfigError):
    """Several configuration mistakes at once; each is in ``errors``, one per line in the text."""

    def __init__(self, errors: Sequence[ConfigError], *, file: str | None = None) -> None:
        self.errors: list[ConfigError] = list(errors)
        if len(self.errors) == 1:
            only = self.errors[0]
            super().__init__(only.bare_message, file=only.file, key=only.key, hint=only.hint,
                             line=only.line)
            return
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{len(self.errors)} configuration errors:\n{lines}", file=file)


def dotted(*parts: str) -> str:
    """``modules.client.use.compare``; a part that is not a bare TOML key is quoted."""
    return ".".join(p if _BARE_KEY.match(p) else '"' + p.replace('"', '\\"') + '"' for p in parts)


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The valid name ``name`` was likely meant to be, or None when nothing is close.

    Case is ignored: a name that differs only in case is the one meant (``SHM`` ->
    ``shm``, ``Async`` -> ``async`` rather than ``sync``), and the spelling comparison is
    made on the lower-case forms so a short word in capitals still finds its match."""
    folded: dict[str, str] = {}
    for choice in choices:
        folded.setdefault(choice.casefold(), choice)
    key = name.casefold()
    if key in folded:
        return folded[key]
    found = difflib.get_close_matches(key, list(folded), n=1, cutoff=0.6)
    return folded[found[0]] if found else None


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The closest valid name as a hint (``did you mean 'shm'?``), or None (``closest``)."""
    close = closest(name, choices)
    return f"did you mean {close!r}?" if close is not None else None


def names_hint(name: str, choices: list[str], what: str) -> str:
    """A hint for ``name``, not one of ``choices`` (the ``what`` there are): the nearest
    (`nearest`), else all of them, else that there are none."""
    return nearest(name, choices) or (f"{what}: {', '.join(choices)}" if choices
                                      else f"there are no {what}")


def names_array(value: Any, key: str, choices: Iterable[str] = ()) -> str | None:
    """The hint for a string where an array of names goes (``cache = "m"``): the word
    among ``choices`` it is near (``"Auto"``), or the names it holds as an array, even of
    one (``cache = ["m"]``); None if it holds no name."""
    if not isinstance(value, str):
        return None
    near = nearest(value, choices)
    if near is not None:
        return near
    names = re.findall(r"[A-Za-z_]\w*", value)
    if not names:
        return None
    words = ", ".join(f'"{n}"' for n in names)
    return f"parameter names go in an array, even one: {key} = [{words}]"


def describe(value: Any) -> str:
    """What was given, for "expected X, got Y" messages."""
    kind = {bool: "boolean", int: "integer", float: "float", str: "string",
            list: "array", dict: "table"}.get(type(value), type(value).__name__)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"an array {value!r}" if len(repr(value)) <= 40 else "an array"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{with_article(kind)} {text}"


_BARE = re.compile(r'"[^"]*"|\'[^\']*\'|(?<![\w.+\-])([A-Za-z_][\w.()\-]*)')


_OPENS = {"[": "array", "{": "table"}  # how the expected kind's TOML begins


def _quoted_words(text: str) -> str | None:
    """``text`` (an array or table of one line that is not TOML) with its bare words
    quoted, if that makes it TOML: ``[3000,4,insertion]`` -> ``[3000,4,"insertion"]``."""
    def quote(m: re.Match[str]) -> str:
        word = m.group(1)
        if word is None or word in ("true", "false", "inf", "nan"):
            return m.group(0)
        end = m.end()
        rest = text[end:].lstrip()
        return word if rest[:1] == "=" else f'"{word}"'  # (a table's key stays bare)
    fixed = _BARE.sub(quote, text)
    return fixed if _reads(fixed) else None


def python_literal(value: Any) -> str:
    """``value`` (as TOML gives one) written as Python that reads back as it: its repr,
    but an infinity or NaN, whose repr (``inf``) is no Python, ``float("inf")``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value!r}")'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _reads(text: str) -> bool:
    """Whether ``text`` is a TOML value (nested too deep for the parser: no)."""
    try:
        tomllib.loads(f"v = {text}")
    except (tomllib.TOMLDecodeError, RecursionError):
        return False
    return True


def _python_value(text: str, expected: str) -> Any | None:
    """What the string ``text`` meant, if it reads as TOML (its bare words quoted if need
    be: ``[3000,4,insertion]``) of the ``expected`` kind (``an array``): that value, as
    Python passes it; else None."""
    for written in (text, _quoted_words(text)):
        if written is None:
            continue
        try:
            doc = tomllib.loads(f"v = {written}")
        except (tomllib.TOMLDecodeError, RecursionError):
            continue
        value = doc.get("v")
        if list(doc) == ["v"] and _of_kind(value, expected):
            return value
    return None


def _of_kind(value: Any, expected: str) -> bool:
    """Whether ``value`` (read from TOML) is of the kind ``expected`` says."""
    if isinstance(value, bool):
        return "true or false" in expected
    if isinstance(value, int):
        return "integer" in expected or "number" in expected
    if isinstance(value, float):
        return "number" in expected
    if isinstance(value, list):
        return "array" in expected
    return isinstance(value, dict) and "table" in expected


def rekey(err: ConfigError, *, file: str | None, key: str | None) -> ConfigError:
    """The same mistake, placed at ``file`` / ``key``."""
    return ConfigError(err.bare_message, file=file, key=key, hint=err.hint)


class Problems:
    """The mistakes found so far in one configuration.

    Keys that an override wrote are reported against the overrides (``--set``, or
    ``overrides`` from Python: ``origin``) instead of the file, because that is where the
    user has to look. ``mil``: the file is in CORD's MIL notation, and what its advice
    says is in its statements.
    """

    def __init__(self, file: str, overridden: Iterable[str] = (), origin: Origin = SET,
                 mil: MilFile | None = None) -> None:
        self.file = file
        self.mil = mil
        self._from = origin
        self.errors: list[ConfigError] = []
        # Likely mistakes that cannot be proven from the files (the run goes ahead).
        self.notes: list[ConfigError] = []
        self._overridden = tuple(overridden)

    def override(self, key: str | None) -> Origin | None:
        """Where the overrides came from, when one wrote ``key`` (or a table above it)."""
        return self._from if written_by(self._overridden, key) else None

    def origin(self, key: str | None) -> str:
        """Where the value at ``key`` came from: the overrides' label or the file."""
        by = self.override(key)
        return by.label if by is not None else self.file

    def add(self, message: str, key: str | None = None, hint: str | None = None) -> None:
        self.errors.append(ConfigError(message, file=self.origin(key), key=key, hint=hint))

    def note(self, message: str, key: str | None = None, hint: str | None = None) -> None:
        self.notes.append(ConfigError(message, file=self.origin(key), key=key, hint=hint))

    def add_error(self, err: ConfigError, key: str | None) -> None:
        """A mistake found by a value parser (which knows no file or key)."""
        self.errors.append(rekey(err, file=self.origin(key), key=key))

    def wrong_type(self, expected: str, value: Any, key: str, hint: str | None = None) -> None:
        """``hint``: what to write instead, unless the shell's quoting is to blame."""
        by = self.override(key)
        if (by is not None and by.shell and isinstance(value, str)
                and _OPENS.get(value[:1], "\0") in expected
                and "\n" not in value and "\r" not in value and not _reads(value)):
            # --set key=[3000,4,insertion]: not TOML (a bare word), so read as a string.
            # (A value of lines is never read as TOML; one that reads was quoted.)
            hint = ("it did not read as TOML, so it was taken as a string; quote the "
                    "strings in it for TOML, inside the shell's quotes")
            fixed = _quoted_words(value)
            if fixed is not None:
                hint += ": " + by.example(key, fixed)
        elif by is not None and not by.shell and isinstance(value, str):
            # polybus.run(path, {"modules.client.args": "[3000, 4]"}): a str is the
            # string; the TOML it reads as is what was meant, as a Python value
            meant = _python_value(value, expected)
            if meant is not None:
                hint = ("a str is taken as the string, not read as TOML: pass the value "
                        "itself, " + by.example(key, python_literal(meant)))
        self.add(f"expected {expected}, got {describe(value)}", key, hint)

    def one_in_array(self, value: Any, key: str, what: str) -> str | None:
        """The hint for one value where an array of them goes (``args = 300``): ``what``
        the array is, and the value in one, as the user writes it here (the file, --set
        or Python); None for a value that is no one item (a table, a string of TOML)."""
        if isinstance(value, str) and value[:1] in ("[", "{"):
            return None
        if not isinstance(value, bool | int | float | str) or value != value:
            return None
        by = self.override(key)
        item = json.dumps(value)  # (TOML, and Python, for these; but an infinity:)
        if isinstance(value, float) and math.isinf(value):
            item = python_literal(value) if by is not None and not by.shell else repr(value)
        written = by.example(key, f"[{item}]") if by is not None \
            else f"{key.rpartition('.')[2]} = [{item}]"
        return f"{what}, even of one: {written}"

    def unknown_keys(self, table: dict[str, Any], valid: Sequence[str], *prefix: str,
                     extra_hints: dict[str, str] | None = None) -> None:
        for k in table:
            if k in valid:
                continue
            hint = (extra_hints or {}).get(k) or foreign_hint(k, table[k], prefix)
            if hint is None:  # (keys.py imports this module: imported when needed)
                from polybus.config.keys import home_hint

                home, near = home_hint(k, prefix), closest(k, valid)
                if home and near and not (near.startswith(k) or k.startswith(near)):
                    near = None  # ('engine' in a module was "did you mean 'define'?")
                said = f"did you mean {near!r}?" if near else None
                hint = f"{said} {home}" if home and said else home or said
            if hint is None:
                hint = "valid keys: " + ", ".join(valid)
            self.add(f"unknown key {k!r}", dotted(*prefix, k), hint)

    def reported(self, key: str) -> bool:
        """Whether a mistake at ``key`` was already found (so checks built on it are moot)."""
        return any(e.key == key for e in self.errors)

    def __bool__(self) -> bool:
        return bool(self.errors)
