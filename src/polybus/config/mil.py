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

from typing import Any

from polybus.config.miltokens import Reader, Tok
from polybus.config.problems import dotted, names_hint
from polybus.errors import ConfigError

__all__ = ["DECLARATIONS", "SUFFIXES", "is_mil", "locate", "parse_mil"]

SUFFIXES = (".cfg", ".mil")
# MIL's structural declarations: read, checked for form, and not part of the document.
DECLARATIONS = ("pattern", "accepts", "returns", "interface")


def is_mil(path: str) -> bool:
    return path.lower().endswith(SUFFIXES)


class _Parser(Reader):
    def __init__(self, text: str, file: str) -> None:
        super().__init__(text, file)
        self.lines: dict[str, int] = {}  # dotted key -> line of the statement that set it

    # -- statements ---------------------------------------------------------------
    def attributes(self) -> list[tuple[Tok, Any]]:
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
        keys: list[tuple[Tok, Any]] = []
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

    def interface(self, kind: Tok, module: str, spec: dict[str, Any]) -> None:
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
