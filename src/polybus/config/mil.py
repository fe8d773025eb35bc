"""CORD's own notation (seeds/001, Figures 2 and 7): a MIL configuration program, read
into the same document a TOML configuration is, so every check, override and run after
it is the same.

    module client {
        source = "client.py" ::
        entrypoint = "main" ::
        use interface compare
            : callstyle = "async-demand(5)"
            : pattern = { string }
            : accepts = { integer } ::
    }
    module server {
        source = "server.py" ::
        define interface compare
            : priority = "len(x)"
            : replication = "a(oc=(load>=10))#b(uc=(load==0)):[1/2]"
            : pattern = { string }
            : returns = { integer } ::
    }
    module dna_search {
        instance client ::
        instance server : standalone ::
        bind client compare server compare ::
    }

A module's ``key = value ::`` is its ``[modules.<name>]`` key; ``use interface f : k = v
...  ::`` its ``use.f`` table, ``define interface f : k = v ... ::`` its ``define.f``
table, except ``replication``, which CORD writes on the interface and polybus keeps on
the module. The application module (the one with ``instance`` and ``bind`` statements)
instantiates the modules it names (only those run), binds ``bind client compare server
compare`` as ``"client.compare" = "server.compare"``, and its own ``key = value ::`` are
``[cluster]`` keys. ``pattern``, ``accepts``, ``returns`` (the interface's types, as
``{ string, integer }``) and ``interface`` (Polylith's bus interface, "stdio" or "null")
are MIL's structural declarations: read and kept out of the document, since polybus
takes types from Python and has one bus. Values: "strings" (adjacent ones joined),
numbers, true/false, [arrays] and { key = value } tables, as in TOML; ``#`` starts a
comment outside a string.

A mistake in the notation is a ConfigError at ``file:line:column``; one found later,
by the checks every configuration goes through, names the line of the statement that
wrote the key (`locate`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from polybus.config.problems import dotted, names_hint
from polybus.errors import ConfigError

__all__ = ["DECLARATIONS", "SUFFIXES", "is_mil", "locate", "parse_mil"]

SUFFIXES = (".cfg", ".mil")
# MIL's structural declarations: read, checked for form, and not part of the document.
DECLARATIONS = ("pattern", "accepts", "returns", "interface")

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>[+-]?(?:\d[\d_]*)(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.]))
  | (?P<sep>::)
  | (?P<punct>[{}\[\]:=,])
  | (?P<word>[A-Za-z_][\w\-]*)
""", re.VERBOSE)


class _Tok:
    __slots__ = ("col", "kind", "line", "text")

    def __init__(self, kind: str, text: str, line: int, col: int) -> None:
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self) -> str:  # (what an error message shows of it)
        return "the end of the file" if self.kind == "end" else repr(self.text)


def is_mil(path: str) -> bool:
    return path.lower().endswith(SUFFIXES)


def _tokens(text: str, file: str) -> list[_Tok]:
    out: list[_Tok] = []
    line, start, pos = 1, 0, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConfigError(f"unexpected {text[pos]!r} in the MIL notation",
                              file=f"{file}:{line}:{pos - start + 1}")
        kind = m.lastgroup or ""
        if kind == "newline":
            line, start = line + 1, m.end()
        elif kind != "space":
            out.append(_Tok(kind, m.group(), line, pos - start + 1))
        pos = m.end()
    out.append(_Tok("end", "", line, pos - start + 1))
    return out


class _Parser:
    def __init__(self, text: str, file: str) -> None:
        self.file = file
        self.toks = _tokens(text, file)
        self.i = 0
        self.lines: dict[str, int] = {}  # dotted key -> line of the statement that set it

    # -- tokens -------------------------------------------------------------------
    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, message: str, tok: _Tok | None = None) -> ConfigError:
        tok = tok or self.peek()
        return ConfigError(message, file=f"{self.file}:{tok.line}:{tok.col}")

    def expect(self, text: str, after: str) -> _Tok:
        tok = self.peek()
        if tok.text != text or tok.kind == "string":
            raise self.error(f"expected '{text}' {after}, found {tok!r}")
        return self.take()

    def word(self, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != "word":
            raise self.error(f"expected {what}, found {tok!r}")
        return self.take()

    # -- values -------------------------------------------------------------------
    def value(self, key: str) -> Any:
        tok = self.peek()
        if tok.kind == "string":
            parts = []
            while self.peek().kind == "string":
                parts.append(json.loads(self.take().text))
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

    # -- statements ---------------------------------------------------------------
    def attributes(self) -> list[tuple[_Tok, Any]]:
        """``: key = value`` ... up to the statement's ``::``."""
        out = []
        while self.peek().text == ":":
            self.take()
            key = self.word("an attribute name after ':'")
            self.expect("=", f"after '{key.text}'")
            out.append((key, self.value(key.text)))
        self.expect("::", "at the end of the statement")
        return out

    def note(self, line: int, *parts: str) -> None:
        self.lines.setdefault(dotted(*parts), line)

    def module(self, doc: dict[str, Any], apps: dict[str, Any]) -> None:
        self.word("'module'")
        name = self.word("the module's name after 'module'")
        if name.text in doc or name.text in apps:
            raise self.error(f"module '{name.text}' is declared twice", name)
        self.expect("{", f"after 'module {name.text}'")
        spec: dict[str, Any] = {}
        app: dict[str, Any] = {"instances": [], "bind": {}, "cluster": {}}
        keys: list[tuple[_Tok, Any]] = []
        while self.peek().text != "}":
            if self.peek().kind == "end":
                raise self.error(f"module '{name.text}' is not closed: '}}' expected, found "
                                 "the end of the file")
            tok = self.word(f"a statement in module '{name.text}' (key = value ::, use "
                            "interface, define interface, instance or bind)")
            if tok.text in ("use", "define"):
                self.interface(tok, name.text, spec)
            elif tok.text == "instance":
                inst = self.word("a module's name after 'instance'")
                if self.peek().text == ":":  # (``instance server: standalone``: how CORD placed it)
                    self.take()
                    self.word(f"a word after 'instance {inst.text} :'")
                self.expect("::", f"after 'instance {inst.text}'")
                app["instances"].append(inst)
            elif tok.text == "bind":
                words = [self.word("4 names after 'bind' (client name server interface)")
                         for _ in range(4)]
                self.expect("::", "after the 4 names of 'bind'")
                left, right = f"{words[0].text}.{words[1].text}", f"{words[2].text}.{words[3].text}"
                app["bind"][left] = right
                self.note(tok.line, "bind", left)
            else:
                self.expect("=", f"after '{tok.text}' (a statement is 'key = value ::')")
                value = self.value(tok.text)
                self.expect("::", f"after the value of '{tok.text}'")
                if tok.text not in DECLARATIONS:
                    keys.append((tok, value))
        self.expect("}", f"to close module '{name.text}'")
        is_app = bool(app["instances"] or app["bind"])
        for tok, value in keys:  # (an application's own keys are the cluster's)
            (app["cluster"] if is_app else spec)[tok.text] = value
            self.note(tok.line, *(("cluster",) if is_app else ("modules", name.text)), tok.text)
        if is_app:
            if spec:
                raise self.error(f"module '{name.text}' has instance or bind statements and "
                                 "use or define interfaces: the application module only "
                                 "instantiates and binds the others", name)
            apps[name.text] = app
        else:
            doc[name.text] = spec

    def interface(self, kind: _Tok, module: str, spec: dict[str, Any]) -> None:
        self.word(f"'interface' after '{kind.text}'")
        name = self.word(f"the interface's name after '{kind.text} interface'")
        table = spec.setdefault(kind.text, {}).setdefault(name.text, {})
        for key, value in self.attributes():
            if key.text in DECLARATIONS:
                continue
            if kind.text == "define" and key.text == "replication":  # (CORD's place for it)
                if "replication" in spec and spec["replication"] != value:
                    raise self.error(f"module '{module}' is given two replications", key)
                spec["replication"] = value
                self.note(key.line, "modules", module, "replication")
                continue
            table[key.text] = value
            self.note(key.line, "modules", module, kind.text, name.text, key.text)
        self.note(kind.line, "modules", module, kind.text, name.text)


def parse_mil(text: str, file: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The configuration document of the MIL program ``text`` (as tomllib would give
    for the TOML it stands for), and the line each dotted key was written at."""
    p = _Parser(text, file)
    modules: dict[str, Any] = {}
    apps: dict[str, Any] = {}
    while p.peek().kind != "end":
        p.module(modules, apps)
    doc: dict[str, Any] = {}
    if len(apps) > 1:
        raise ConfigError(f"{len(apps)} application modules ({', '.join(apps)}): a MIL "
                          "program has one module with the instance and bind statements",
                          file=file)
    if apps:
        (app_name, app), = apps.items()
        chosen: dict[str, Any] = {}
        for inst in app["instances"]:
            if inst.text not in modules:
                e = p.error(f"'instance {inst.text}' in module '{app_name}' names no module "
                            "declared here", inst)
                raise ConfigError(e.bare_message, file=e.file,
                                  hint=names_hint(inst.text, list(modules), "modules declared"))
            chosen[inst.text] = modules[inst.text]
        doc["modules"] = chosen or modules
        if app["bind"]:
            doc["bind"] = app["bind"]
        if app["cluster"]:
            doc["cluster"] = app["cluster"]
    else:
        doc["modules"] = modules
    return doc, p.lines


def locate(lines: dict[str, int], key: str | None) -> int | None:
    """The line of the statement that wrote ``key`` (or its nearest table above it)."""
    while key:
        if key in lines:
            return lines[key]
        key = key.rpartition(".")[0]
    return None
