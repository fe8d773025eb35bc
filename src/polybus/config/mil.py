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
comment outside a string. Each key, interface, instance and bind is said once (TOML
refuses a key twice; a second ``bind`` of a name silently replaced the first), but for
``replication`` restated alike on each interface, as CORD writes it.

A mistake in the notation is a ConfigError at ``file:line:column``; one found later,
by the checks every configuration goes through, names the line of the statement that
wrote the key (milfile.py, `MilFile.locate`), and says its advice in MIL.
"""

from __future__ import annotations

from typing import Any

from polybus.config.milfile import MilFile
from polybus.config.miltokens import Reader, Tok
from polybus.config.problems import dotted, names_hint
from polybus.errors import ConfigError

__all__ = ["DECLARATIONS", "SUFFIXES", "is_mil", "parse_mil"]

SUFFIXES = (".cfg", ".mil")
# MIL's structural declarations: read, checked for form, and not part of the document.
DECLARATIONS = ("pattern", "accepts", "returns", "interface")


def is_mil(path: str) -> bool:
    return path.lower().endswith(SUFFIXES)


class _Parser(Reader):
    def __init__(self, text: str, file: str) -> None:
        super().__init__(text, file)
        self.lines: dict[str, int] = {}  # dotted key -> line of the statement that set it
        self.declared: dict[str, int] = {}  # module -> line of its 'module' statement

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

    def module(self, doc: dict[str, Any], apps: dict[str, _Module]) -> None:
        self.word("'module'")
        name = self.word("the module's name after 'module'")
        if name.text in self.declared:
            raise self.error(f"module '{name.text}' is declared twice (first at line "
                             f"{self.declared[name.text]})", name)
        self.declared[name.text] = name.line
        self.expect("{", f"after 'module {name.text}'")
        m = _Module(name.text)
        while self.peek().text != "}":
            if self.peek().kind == "end":
                raise self.error(f"module '{name.text}' is not closed: '}}' expected, found "
                                 "the end of the file")
            tok = self.word(f"a statement in module '{name.text}' (key = value ::, use "
                            "interface, define interface, instance or bind)")
            if tok.text in ("use", "define"):
                self.interface(tok, m)
            elif tok.text == "instance":
                self.instance(m)
            elif tok.text == "bind":
                self.bind(tok, m)
            else:
                self.expect("=", f"after '{tok.text}' (a statement is 'key = value ::')")
                first = self.i
                value = self.value(tok.text)
                if tok.text == "source":
                    self.source_place(m, self.toks[first:self.i])
                self.expect("::", f"after the value of '{tok.text}'")
                self.key(m, tok, value)
        self.expect("}", f"to close module '{name.text}'")
        if m.is_app():
            if m.spec:
                raise self.error(f"module '{name.text}' has instance or bind statements and "
                                 "use or define interfaces: the application module only "
                                 "instantiates and binds the others", name)
            for key, (tok, _) in m.given():  # (an application's own keys are the cluster's)
                self.note(tok.line, "cluster", key)
            self.note(name.line, "bind")  # (where a binding missing from it is to go)
            self.note(name.line, "cluster")
            apps[name.text] = m
        else:
            for key, (tok, value) in m.given():
                m.spec[key] = value
                self.note(tok.line, "modules", name.text, key)
            if m.replication is not None:  # (written on a define interface only)
                m.spec.setdefault("replication", m.replication[1])
            doc[name.text] = m.spec

    def source_place(self, m: _Module, toks: list[Tok]) -> None:
        """CORD's ``source = "C" "local" ::`` (Figure 2) names the module's language and
        where it runs; joined as adjacent strings are, it was looked for as a file."""
        places = ("local", "remote")
        if len(toks) < 2 or any(t.kind != "string" for t in toks):
            return
        if self.string(toks[-1]) not in places:
            return
        raise self.error(
            f"source = {' '.join(t.text for t in toks)}: in CORD's notation a language and "
            f"a place ({toks[-1].text}); in polybus source is the module's Python file, "
            f"relative to this file (source = \"{m.name}.py\" ::), and where it runs is "
            "the engine's, [cluster] engine" + (
                " (a served module called in the client's own process has replication "
                "= 0 ::)" if self.string(toks[-1]) == "local" else ""), toks[0])

    def key(self, m: _Module, tok: Tok, value: Any) -> None:
        """``key = value ::``, each key once (a declaration too: it is left out after)."""
        first = m.keys.get(tok.text)
        if first is not None:
            raise self.error(f"module '{m.name}' sets '{tok.text}' twice (first at line "
                             f"{first[0].line})", tok)
        if tok.text == "replication":
            self.replication(m, tok, value)
        m.keys[tok.text] = (tok, value)

    def replication(self, m: _Module, tok: Tok, value: Any) -> None:
        """One replication a module: CORD writes it on each interface, and the module's
        own key may say it too; said again, it must be the same."""
        if m.replication is not None and m.replication[1] != value:
            raise self.error(f"module '{m.name}' is given two replications (first at line "
                             f"{m.replication[0].line})", tok)
        m.replication = m.replication or (tok, value)

    def instance(self, m: _Module) -> None:
        inst = self.word("a module's name after 'instance'")
        if self.peek().text == ":":  # (``instance server: standalone``: how CORD placed it)
            self.take()
            self.word(f"a word after 'instance {inst.text} :'")
        self.expect("::", f"after 'instance {inst.text}'")
        if inst.text in m.instances:
            raise self.error(f"module '{inst.text}' is instanced twice (first at line "
                             f"{m.instances[inst.text].line})", inst)
        m.instances[inst.text] = inst

    def bind(self, tok: Tok, m: _Module) -> None:
        words = [self.word("4 names after 'bind' (client name server interface)")
                 for _ in range(4)]
        self.expect("::", "after the 4 names of 'bind'")
        left, right = f"{words[0].text}.{words[1].text}", f"{words[2].text}.{words[3].text}"
        if left in m.bind:
            first, target = m.bind[left]
            raise self.error(f"'{left}' is bound twice (first at line {first.line}: bind "
                             f"{left.replace('.', ' ')} {target.replace('.', ' ')})", words[0])
        m.bind[left] = (tok, right)
        self.note(tok.line, "bind", left)

    def interface(self, kind: Tok, m: _Module) -> None:
        self.word(f"'interface' after '{kind.text}'")
        name = self.word(f"the interface's name after '{kind.text} interface'")
        tables = m.spec.setdefault(kind.text, {})
        if name.text in tables:
            verb = "uses" if kind.text == "use" else "defines"
            raise self.error(f"module '{m.name}' {verb} interface '{name.text}' twice (first "
                             f"at line {self.lines[dotted('modules', m.name, kind.text, name.text)]}"
                             f"): one '{kind.text} interface' statement gives all its "
                             "attributes", name)
        table = tables[name.text] = {}
        self.note(kind.line, "modules", m.name, kind.text, name.text)
        given: dict[str, int] = {}
        for key, value in self.attributes():
            if key.text in given:
                raise self.error(f"'{kind.text} interface {name.text}' sets '{key.text}' twice "
                                 f"(first at line {given[key.text]})", key)
            given[key.text] = key.line
            if key.text in DECLARATIONS:
                continue
            _declaration_misspelt(self, kind.text, key)
            if kind.text == "define" and key.text == "replication":  # (CORD's place for it)
                self.replication(m, key, value)
                self.note(key.line, "modules", m.name, "replication")
                continue
            table[key.text] = value
            self.note(key.line, "modules", m.name, kind.text, name.text, key.text)


def _declaration_misspelt(reader: Reader, kind: str, key: Tok) -> None:
    """An attribute that is no key of its ``use`` or ``define`` table and reads as a
    misspelt declaration (``patern``) is said so at its line: left to the table's
    checks, it was an unknown key whose valid keys were listed without the declarations,
    which the file's other interfaces may use."""
    from polybus.config.keys import DEFINE_KEYS, USE_KEYS
    from polybus.config.problems import closest

    keys = USE_KEYS if kind == "use" else (*DEFINE_KEYS, "replication")
    if key.text in keys:
        return
    near = closest(key.text, (*keys, *DECLARATIONS))
    if near in DECLARATIONS:
        raise reader.error(f"'{kind} interface' has no attribute '{key.text}': did you mean "
                           f"'{near}'? (a declaration of the interface's types, read and "
                           f"not used: {', '.join(DECLARATIONS[:3])})", key)


class _Module:
    """What one ``module name { ... }`` has said so far."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.spec: dict[str, Any] = {}  # its use and define tables
        self.keys: dict[str, tuple[Tok, Any]] = {}  # key = value ::, in order
        self.replication: tuple[Tok, Any] | None = None  # the first said, key or attribute
        self.instances: dict[str, Tok] = {}
        self.bind: dict[str, tuple[Tok, str]] = {}  # "client.name" -> (its bind, "server.iface")

    def given(self) -> list[tuple[str, tuple[Tok, Any]]]:
        """Its ``key = value ::`` but the declarations (read, and left out)."""
        return [(k, v) for k, v in self.keys.items() if k not in DECLARATIONS]

    def is_app(self) -> bool:
        return bool(self.instances or self.bind)


def parse_mil(text: str, file: str) -> tuple[dict[str, Any], MilFile]:
    """The configuration document of the MIL program ``text`` (as tomllib would give
    for the TOML it stands for), and what the checks of it need to say a mistake at its
    line and in its words (the line each dotted key was written at, ...)."""
    p = _Parser(text, file)
    modules: dict[str, Any] = {}
    apps: dict[str, _Module] = {}
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
        for inst in app.instances.values():
            if inst.text not in modules:
                e = p.error(f"'instance {inst.text}' in module '{app_name}' names no module "
                            "declared here", inst)
                raise ConfigError(e.bare_message, file=e.file,
                                  hint=names_hint(inst.text, list(modules), "modules declared"))
            chosen[inst.text] = modules[inst.text]
        doc["modules"] = chosen or modules
        if app.bind:
            doc["bind"] = {left: right for left, (_, right) in app.bind.items()}
        if app.given():
            doc["cluster"] = {key: value for key, (_, value) in app.given()}
    else:
        doc["modules"] = modules
    return doc, MilFile(p.lines, p.declared, next(iter(apps), None))

