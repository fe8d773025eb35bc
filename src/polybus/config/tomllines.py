"""The line of a TOML file that wrote a dotted key, for errors that say file:line.

tomllib gives values, not places. A configuration error names its key
(``modules.server.replicaton``); this finds the line from the text: table headers
(``[modules.server]``) and key lines (``replicaton = 2``, ``use.f = { ... }``,
``"client.f" = ...``), their keys joined as the errors join them (problems.dotted). A key written inside
an inline table or a value of several lines is placed at the line of the key that
holds it, a key no line wrote (one that is missing) at its table's header, and a table
that only a dotted header made (``modules`` of ``[modules.server]``) at its first. Lines inside
multi-line strings are skipped. Only for messages: a line not found is None, and the
error is shown without one.

It also keeps what a key line wrote (config/written.py), for `as_written`: a number
TOML reads as infinity (``1e309``) is quoted by the checks as ``inf``, and put back as
written.
"""

from __future__ import annotations

from polybus.config.overrides import parse_key_path
from polybus.config.problems import dotted
from polybus.config.written import Written
from polybus.errors import ConfigError

__all__ = ["TomlLines"]


def _key(text: str) -> list[str] | None:
    """The parts of the dotted key ``text`` (as `--set` reads one), or None."""
    try:
        return parse_key_path(text)
    except ConfigError:
        return None


class TomlLines:
    """Where each table and key of a TOML text was written (1-based lines)."""

    def __init__(self, text: str) -> None:
        self.lines: dict[str, int] = {}
        self.written: dict[int, str] = {}  # (the key or table each line wrote)
        self.written_values = Written()  # (what each key line wrote after its '=')
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
                header = _key(s.strip("[").partition("]")[0])
                if header is not None:
                    table = header
                    self.written[no] = dotted(*table)
                    # (and the tables it makes by the way: [module.worker] is where a
                    # misspelt 'module' was written)
                    for n in range(1, len(table) + 1):
                        self.lines.setdefault(dotted(*table[:n]), no)
                continue
            name, eq, value = s.partition("=")
            parts = _key(name) if eq else None
            if parts is None:
                continue
            self.lines.setdefault(dotted(*table, *parts), no)
            self.written[no] = dotted(*table, *parts)
            self.written_values.add([*table, *parts], value)
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

    def as_written(self, key: str | None, message: str) -> str:
        """``message`` (of the mistake at ``key``) with a number TOML read as infinity
        (``1e309``: a value or an array's items on the key's own line, or inside an
        inline table there) quoted as the line wrote it, not as ``inf`` (written.py)."""
        return self.written_values.as_written(key, message)
