"""The tokens of CORD's MIL notation and its values ("strings", numbers, true/false,
[arrays], { key = value } tables and { type, ... } lists), for config/mil.py, which
reads its statements."""

from __future__ import annotations

import json
import re
from typing import Any

from polybus.errors import ConfigError

__all__ = ["Reader", "Tok"]

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>[+-]?(?:\d[\d_]*)(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.]))
  | (?P<sep>::)
  | (?P<punct>[{}\[\]:=,])
  | (?P<word>[A-Za-z_][\w\-]*)
""", re.VERBOSE)


class Tok:
    __slots__ = ("col", "kind", "line", "text")

    def __init__(self, kind: str, text: str, line: int, col: int) -> None:
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self) -> str:  # (what an error message shows of it)
        return "the end of the file" if self.kind == "end" else repr(self.text)


def _tokens(text: str, file: str) -> list[Tok]:
    out: list[Tok] = []
    line, start, pos = 1, 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            where = f"{file}:{line}:{pos - start + 1}"
            if text[pos] == '"':
                raise _open_string(text, pos, where)
            raise ConfigError(f"unexpected {text[pos]!r} in the MIL notation", file=where)
        kind = m.lastgroup or ""
        if kind == "newline":
            line, start = line + 1, m.end()
        elif kind != "space":
            out.append(Tok(kind, m.group(), line, pos - start + 1))
        pos = m.end()
    out.append(Tok("end", "", line, pos - start + 1))
    return out


def _open_string(text: str, pos: int, where: str) -> ConfigError:
    """A ``"`` whose string does not end on its line (a string token cannot hold a line
    break): CORD's paper breaks a long replication list so, inside one string."""
    rest = text[pos + 1:].split("\n", 1)[0].rstrip()
    shown = rest if len(rest) <= 40 else rest[:37] + "..."
    return ConfigError(
        f'a string is not closed on its line ("{shown} ...): a string ends on the line it '
        f'starts; write a long value as adjacent strings, which are joined, one a line: '
        f'"{shown}" "..."', file=where)


class Reader:
    """The tokens of one MIL file, and its values; `mil._Parser` reads its statements."""

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.toks = _tokens(text, file)
        self.i = 0

    # -- tokens -------------------------------------------------------------------
    def peek(self) -> Tok:
        return self.toks[self.i]

    def take(self) -> Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, message: str, tok: Tok | None = None) -> ConfigError:
        tok = tok or self.peek()
        return ConfigError(message, file=f"{self.file}:{tok.line}:{tok.col}")

    def expect(self, text: str, after: str) -> Tok:
        tok = self.peek()
        if tok.text != text or tok.kind == "string":
            raise self.error(f"expected '{text}' {after}, found {tok!r}")
        return self.take()

    def word(self, what: str) -> Tok:
        tok = self.peek()
        if tok.kind != "word":
            raise self.error(f"expected {what}, found {tok!r}")
        return self.take()

    # -- values -------------------------------------------------------------------
    def string(self, tok: Tok) -> str:
        """A string token's text, its escapes (JSON's) read."""
        try:
            return str(json.loads(tok.text))
        except json.JSONDecodeError as e:  # (a backslash not of an escape)
            raise self.error(
                f"bad escape in the string {tok.text} ({e.msg}): a backslash starts an "
                f'escape (\\n, \\", \\uXXXX); write \\\\ for a backslash itself', tok) from None

    def value(self, key: str) -> Any:
        tok = self.peek()
        if tok.kind == "string":
            parts = []
            while self.peek().kind == "string":
                parts.append(self.string(self.take()))
            return "".join(parts)
        if tok.kind == "number":
            self.take()
            text = tok.text.replace("_", "")
            return float(text) if any(c in text for c in ".eE") else int(text)
        if tok.kind == "word" and tok.text in ("true", "false"):
            self.take()
            return tok.text == "true"
        if tok.text == "[":
            self.take()
            items = []
            while self.peek().text != "]":
                items.append(self.value(key))
                if self.peek().text != ",":
                    break
                self.take()
            self.expect("]", f"to close the array of '{key}'")
            return items
        if tok.text == "{":
            return self.braces(key)
        raise self.error(f"expected a value for '{key}' (a \"string\", a number, true, "
                         f"false, [an array] or {{a table}}), found {tok!r}")

    def braces(self, key: str) -> Any:
        """``{ k = v, ... }`` (a table) or ``{ type, ... }`` (MIL's types: a list)."""
        self.expect("{", "")
        table: dict[str, Any] = {}
        types: list[str] = []
        while self.peek().text != "}":
            name = self.word(f"a name in the braces of '{key}'")
            if self.peek().text == "=":
                if name.text in table:  # (as TOML refuses it)
                    raise self.error(f"'{name.text}' is given twice in the braces of "
                                     f"'{key}'", name)
                self.take()
                table[name.text] = self.value(f"{key}.{name.text}")
            else:
                types.append(name.text)
            if table and types:
                raise self.error(f"the braces of '{key}' mix 'name = value' and bare "
                                 "names: a table has only the first, a list of types only "
                                 "the second", name)
            if self.peek().text != ",":
                break
            self.take()
        self.expect("}", f"to close the braces of '{key}'")
        return types if types else table
