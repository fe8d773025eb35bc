"""The line of a TOML file that wrote a dotted key, for errors that say file:line.

tomllib gives values, not places. A configuration error names its key
(``modules.server.replicaton``); this finds the line from the text: table headers
(``[modules.server]``) and key lines (``replicaton = 2``, ``use.f = { ... }``,
``"client.f" = ...``), their keys joined as the errors join them (problems.dotted). A key written inside
an inline table or a value of several lines is placed at the line of the key that
holds it, a key no line wrote (one that is missing) at its table's header. Lines inside
multi-line strings are skipped. Only for messages: a line not found is None, and the
error is shown without one.
"""

from __future__ import annotations

import re

from polybus.config.problems import dotted

__all__ = ["TomlLines"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key_parts(text: str) -> tuple[list[str], str] | None:
    """The parts of the dotted key ``text`` starts with (bare or quoted), and what comes
    after it; None if it does not start with one."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] in "\"'":
            q = text[i]
            j = i + 1
            out = []
            while j < n and text[j] != q:
                if q == '"' and text[j] == "\\" and j + 1 < n:
                    j += 1
                out.append(text[j])
                j += 1
            if j >= n:
                return None
            parts.append("".join(out))
            i = j + 1
        else:
            m = _BARE.match(text, i)
            if m is None:
                return None
            parts.append(m.group())
            i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == ".":
            i += 1
            continue
        return parts, text[i:]


class TomlLines:
    """Where each table and key of a TOML text was written (1-based lines)."""

    def __init__(self, text: str) -> None:
        self.lines: dict[str, int] = {}
        table: list[str] = []
        in_string: str | None = None  # the quotes of a multi-line string being read
        for no, line in enumerate(text.splitlines(), 1):
            if in_string is not None:
                if in_string in line:
                    in_string = None
                continue
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s.startswith("["):
                got = _key_parts(s.lstrip("[").lstrip())
                if got is not None and got[1].lstrip().startswith("]"):
                    table = got[0]
                    self.lines.setdefault(dotted(*table), no)
                continue
            got = _key_parts(s)
            if got is None or not got[1].startswith("="):
                continue
            self.lines.setdefault(dotted(*table, *got[0]), no)
            value = got[1][1:]
            for q in ('"""', "'''"):
                if value.count(q) % 2 == 1:
                    in_string = q

    def locate(self, key: str | None) -> int | None:
        """The line that wrote ``key``, or the key or table nearest above it."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:key.index("[")] if key.endswith("]") and "[" in key else \
                key.rpartition(".")[0]  # (an item of an array: the array's line)
        return None
