"""A configuration file that is not valid TOML, or not UTF-8, said at its line.

tomllib's words name no key: "Cannot overwrite a value (at line 16, column 16)" was a
key given twice, "Cannot mutate immutable namespace ('modules', 'server', 'define',
'f')" a key added to an inline table written earlier. These three are said with the
key and the line that first wrote it (config/tomllines.py); others keep tomllib's
words, their line given as every configuration error's is. A file saved in another
encoding (Latin-1, as an editor may) was said at a byte offset of the file.
"""

from __future__ import annotations

import ast
import codecs
import re
import tomllib

from polybus.config.problems import dotted
from polybus.config.tomllines import TomlLines
from polybus.errors import ConfigError

__all__ = ["not_toml", "not_utf8"]

_AT = re.compile(r"^(.*) \(at line (\d+), column (\d+)\)$", re.DOTALL)
_NAMED = re.compile(r"^Cannot (declare|mutate immutable namespace) (\(.*\))(?: twice)?$")


def _table(words: str) -> str | None:
    """The dotted key of tomllib's tuple of its parts (``('modules', 'server')``)."""
    try:
        parts = ast.literal_eval(words)
    except (ValueError, SyntaxError):
        return None
    ok = isinstance(parts, tuple) and parts and all(isinstance(x, str) for x in parts)
    return dotted(*parts) if ok else None


def _said(what: str, line: int, text: str) -> tuple[str, str] | None:
    """The message and hint for tomllib's ``what`` at ``line``, when it is one of the
    mistakes above and the line that first wrote its key is found; else None."""
    lines = TomlLines(text)
    if what == "Cannot overwrite a value":
        key = lines.written.get(line)
        first = lines.lines.get(key) if key is not None else None
        if key is None or first is None or first >= line:
            return None  # (a key given twice within one inline table: tomllib's words)
        return (f"{key} is given twice (first at line {first})",
                "a key is given once in its table: keep one of them")
    m = _NAMED.match(what)
    key = _table(m.group(2)) if m else None
    first = lines.lines.get(key) if key is not None else None
    if m is None or key is None or first is None or first >= line:
        return None
    if m.group(1) == "declare":
        return (f"the table [{key}] is declared twice (first at line {first})",
                "a table's keys go under one header: move them to the first")
    return (f"{key} was written whole as an inline table at line {first}, and line {line} "
            "adds to it", "an inline table { ... } takes no keys after it: put this one "
            f"inside its braces, or write it as a table of its own, [{key}]")


def not_toml(e: tomllib.TOMLDecodeError, text: str, file: str) -> ConfigError:
    """``e``, tomllib's error reading ``text`` (the file ``file``), as a ConfigError at
    its line."""
    m = _AT.match(str(e))
    if m is None:  # ("at end of document": no line)
        return ConfigError(f"not valid TOML: {e}", file=file)
    what, line, column = m.group(1), int(m.group(2)), int(m.group(3))
    said = _said(what, line, text)
    if said is not None:
        return ConfigError(f"not valid TOML: {said[0]}", file=file, line=line, hint=said[1])
    return ConfigError(f"not valid TOML: {what} (at column {column})", file=file, line=line)


def not_utf8(e: UnicodeDecodeError, data: bytes, file: str) -> ConfigError:
    """``e``, met decoding ``data`` (the file ``file``) as UTF-8, at its line and
    column (in characters, those before it read leniently)."""
    at = e.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
    start = data.rfind(b"\n", 0, at) + 1  # (utf-8-sig counts from past its mark)
    line = data.count(b"\n", 0, at) + 1
    column = len(data[start:at].decode("utf-8-sig", "replace")) + 1
    return ConfigError(f"the configuration file is not UTF-8 text: byte 0x{data[at]:02x} at "
                       f"column {column}", file=file, line=line,
                       hint="save it as UTF-8; a byte order mark at its start is read past")
