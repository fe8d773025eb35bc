"""The ``replication`` value of a module: a count, or CORD's replica / migration notation.

A count ``N`` names the replicas ``<module>-0`` .. ``<module>-{N-1}``; ``0`` names none:
the module's interfaces are then called in the client process, in the calling thread, as
plain Python calls (CORD's ``local`` placement: client/inclient.py). A string is a
comma-separated list of items; an item is one replica or a migration path of replicas
joined by ``#``::

    spec     := item ("," item)*
    item     := replica ("#" replica)* [":" "[" fraction "]"]
    replica  := name ( ":speed=" float | "(" cond ("," cond)* ")" )*
    cond     := ("oc" | "uc") "=" ["("] "load" op bound [")"]
    op       := "<" | "<=" | "==" | "!=" | ">=" | ">"
    bound    := int | [number "*"] name [("+" | "-") int]
    name     := "mean" | "min" | "max" | "total" | "peer"
    fraction := int "/" int | float                 (default 1/2)

``a#b#c`` is a line (paths a-b and b-c), ``a#b#c#a`` a ring. ``oc`` is the overload
condition (the replica pushes calls away), ``uc`` the underload one (it pulls calls in).
A condition compares the replica's ``load`` with a whole number, or with global load
information: a name, optionally times a factor ``K*`` (more than 0) and plus or minus a
whole number (``load>=mean+2``, ``load>2*peer``, ``load<=min``; config/loadbound.py).
A replica named only inside a path is still a replica. Positions in error messages are
0-based offsets into the string.

A string that is one bare word is one replica of that name, with two exceptions, both
mistakes for a count rather than names: a number word (``"two"``, ``"Twenty-one"``) and a
word that starts with a digit but is not a count or a dotted host (``"4x"``, ``"2.0"``,
``"1e3"``). A replica really named so is written with its speed: ``"two:speed=1"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, cast

from polybus.config.loadbound import CONDITION_FORMS, BoundError, read_bound
from polybus.config.model import Condition, MigrationPath, ReplicaSpec
from polybus.config.problems import closest
from polybus.errors import ConfigError

__all__ = ["MAX_REPLICAS", "REPLICATION_FORMS", "REPLICA_NAME", "given_as_names",
           "parse_replication"]

REPLICATION_FORMS = ("a count N >= 0 (0: no replicas, its calls made in the client), or names such as 'a,b,c' or 'a:speed=0.5', "
                     "or a migration path such as 'a(oc=(load>=10))#b(uc=(load==0)):[1/2]'")

MAX_REPLICAS = 1 << 16  # a sanity bound: a typo like 40000000 should not build 40M specs

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
REPLICA_NAME = _NAME
"""A replica's name as ``replication`` writes it (``polybus worker --name`` takes the same)."""
_FLOAT = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_RATIO = re.compile(r"([0-9]+)\s*/\s*([0-9]+)")
_OPTION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")  # (the word after a replica's ':')
_OPS = ("<=", ">=", "==", "!=", "<", ">")

Op = Literal["<", "<=", "==", "!=", ">=", ">"]

_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
          "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
          "seventeen", "eighteen", "nineteen")
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
_NUMBER_WORD_VALUES = {**{w: i for i, w in enumerate(_UNITS)}, **_TENS,
                       "hundred": 100, "thousand": 1000, "dozen": 12}
# Longest first, so "seventeen" is one word and not "seven" + "teen".
_NUMBER_WORD = "|".join(sorted(_NUMBER_WORD_VALUES, key=len, reverse=True))
_NUMBER_WORDS = re.compile(rf"(?:(?:{_NUMBER_WORD})[-_ ]?)+", re.IGNORECASE)
_A_FLOAT = re.compile(r"[0-9]+\.[0-9]*|\.[0-9]+")


@dataclass
class _Replica:
    name: str
    speed: float | None = None
    overload: Condition | None = None
    underload: Condition | None = None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.replicas: dict[str, _Replica] = {}
        self.bare: set[str] = set()
        self.paths: list[MigrationPath] = []

    # -- scanning ----------------------------------------------------------------------
    def error(self, expected: str, pos: int | None = None) -> ConfigError:
        at = self.pos if pos is None else pos
        found = repr(self.text[at]) if at < len(self.text) else "end of text"
        return ConfigError(f"bad replication {self.text!r}: at position {at}: expected "
                           f"{expected}, found {found}", hint=REPLICATION_FORMS)

    def problem(self, message: str, pos: int, hint: str = REPLICATION_FORMS) -> ConfigError:
        return ConfigError(f"bad replication {self.text!r}: at position {pos}: {message}",
                           hint=hint)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def at(self, token: str) -> bool:
        self.skip_ws()
        return self.text.startswith(token, self.pos)

    def expect(self, token: str) -> None:
        if not self.at(token):
            raise self.error(repr(token))
        self.pos += len(token)

    def match(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip_ws()
        m = pattern.match(self.text, self.pos)
        if m is None:
            raise self.error(what)
        self.pos = m.end()
        return m.group(0)

    # -- grammar -----------------------------------------------------------------------
    def spec(self) -> None:
        self.item()
        while self.at(","):
            self.pos += 1
            self.item()
        self.skip_ws()
        if self.pos < len(self.text):
            raise self.error("',' or '#' or end of text")

    def item(self) -> None:
        self.skip_ws()
        start = self.pos
        names = [self.replica()]
        starts = [start]
        while self.at("#"):
            self.pos += 1
            self.skip_ws()
            starts.append(self.pos)
            names.append(self.replica())
        fraction = 0.5
        if self.at(":"):
            self.pos += 1
            if not self.at("["):
                raise self.not_a_fraction()
            if len(names) == 1:
                raise self.problem("a fraction is given but there is no migration path "
                                   "(join replicas with '#')", self.pos)
            fraction = self.fraction()
        if len(names) == 1:
            if names[0] in self.bare:
                raise self.problem(f"duplicate replica {names[0]!r}", starts[0])
            self.bare.add(names[0])
        for i in range(len(names) - 1):
            a, b = names[i], names[i + 1]
            if a == b:
                raise self.problem(f"a migration path from {a!r} to itself", starts[i + 1])
            if any({p.a, p.b} == {a, b} for p in self.paths):
                raise self.problem(f"duplicate migration path {a}#{b}", starts[i])
            self.paths.append(MigrationPath(a, b, fraction))

    def replica(self) -> str:
        name = self.match(_NAME, "a replica name")
        rep = self.replicas.setdefault(name, _Replica(name))
        seen: set[str] = set()
        while True:
            if self.at("("):
                self.pos += 1
                self.condition(rep, seen)
                while self.at(","):
                    self.pos += 1
                    self.condition(rep, seen)
                self.expect(")")
            elif self.at(":") and self.option() == "speed":
                self.pos += 1
                self.expect("speed")
                where = self.pos
                if "speed" in seen:
                    raise self.problem(f"speed given twice for replica {name!r}", where)
                seen.add("speed")
                self.expect("=")
                self.skip_ws()
                where = self.pos
                speed = float(self.match(_FLOAT, "a speed such as 0.5"))
                if not 0 < speed <= 1:
                    raise self.problem(f"speed {speed} is out of range (0 < speed <= 1)", where)
                if rep.speed is not None and rep.speed != speed:
                    raise self.problem(f"conflicting speeds for replica {name!r}", where)
                rep.speed = speed
            else:
                break
        return name

    def option(self) -> str | None:
        """The word after the ':' at ``pos`` (``speed`` in ``a:speed=0.5``), if one is."""
        m = _OPTION.match(self.text, self.pos + 1)
        return m.group(1) if m is not None else None

    def not_a_fraction(self) -> ConfigError:
        """After a ':' that is neither a replica's ``speed=`` nor a path's ``[fraction]``:
        a word near ``speed``, or one given a value, is an option misspelled or unknown
        (``a:sped=0.5`` was told only that a fraction's '[' was expected)."""
        self.skip_ws()
        m = _OPTION.match(self.text, self.pos)
        if m is not None:
            word, near = m.group(1), closest(m.group(1), ["speed"])
            if near is not None:
                return self.problem(f"unknown replica option {word!r} (did you mean "
                                    f"{near!r}?)", self.pos)
            if self.text[m.end():].lstrip().startswith("="):
                return self.problem(f"unknown replica option {word!r}: a replica takes "
                                    "':speed=F', a migration path ':[fraction]'", self.pos)
        return self.error("'[' of a fraction such as ':[1/2]'")

    def condition(self, rep: _Replica, seen: set[str]) -> None:
        self.skip_ws()
        where = self.pos
        if self.at("oc"):
            which = "oc"
        elif self.at("uc"):
            which = "uc"
        else:
            raise self.error("'oc=' or 'uc='")
        if which in seen:
            raise self.problem(f"{which} given twice for replica {rep.name!r}", where)
        seen.add(which)
        self.pos += 2
        self.expect("=")
        parens = self.at("(")
        if parens:
            self.pos += 1
        self.expect("load")
        self.skip_ws()
        op = next((o for o in _OPS if self.text.startswith(o, self.pos)), None)
        if op is None:
            raise self.error("one of < <= == != >= >")
        self.pos += len(op)
        try:
            value, name, factor, self.pos = read_bound(self.text, self.pos)
        except BoundError as e:
            raise self.problem(str(e), e.pos, CONDITION_FORMS) from None
        if parens:
            self.expect(")")
        cond = Condition(cast(Op, op), value, name, factor)
        old = rep.overload if which == "oc" else rep.underload
        if old is not None and old != cond:
            raise self.problem(f"conflicting {which} conditions for replica {rep.name!r}", where)
        if which == "oc":
            rep.overload = cond
        else:
            rep.underload = cond

    def fraction(self) -> float:
        self.expect("[")
        self.skip_ws()
        where = self.pos
        m = _RATIO.match(self.text, self.pos)
        if m is not None:
            if int(m.group(2)) == 0:
                raise self.problem("a fraction with denominator 0", where)
            value = float(Fraction(int(m.group(1)), int(m.group(2))))
            self.pos = m.end()
        else:
            value = float(self.match(_FLOAT, "a fraction such as 1/2 or 0.25"))
        if not 0 < value <= 1:
            raise self.problem(f"fraction {value} is out of range (0 < fraction <= 1)", where)
        self.expect("]")
        return value


def _number_word_value(word: str) -> int | None:
    """The number ``word`` spells (``"twenty-one"`` -> 21), None if it spells none."""
    if not _NUMBER_WORDS.fullmatch(word):
        return None
    total = current = 0
    for token in re.findall(_NUMBER_WORD, word.lower()):
        value = _NUMBER_WORD_VALUES[token]
        if value == 1000:
            total, current = total + max(current, 1) * 1000, 0
        elif value == 100:
            current = max(current, 1) * 100
        else:
            current += value
    return total + current


def _not_a_name(word: str) -> ConfigError | None:
    """Why a lone bare word is a mistaken count rather than one replica's name, if it is."""
    spelled = _number_word_value(word)
    if spelled is not None:
        count = f"replication = {spelled}"
        return ConfigError(f"{word!r} reads as a number word, not a replica name: a count is "
                           f"written as a number ({count}); a single replica really named "
                           f"{word!r} is written '{word}:speed=1'", hint=REPLICATION_FORMS)
    if word[0].isdigit() and ("." not in word or _A_FLOAT.fullmatch(word)):
        return ConfigError(f"{word!r} is not a whole number of replicas: a count is written "
                           "as a bare whole number (replication = 4); a single replica "
                           f"whose name starts with a digit is written '{word}:speed=1'",
                           hint=REPLICATION_FORMS)
    return None


def given_as_names(value: object) -> bool:
    """Whether a ``replication`` value names its replicas (a string that is not a count,
    ``"server-0"`` as much as ``"alpha,beta"``) rather than counting them."""
    return isinstance(value, str) and not (value.strip().isascii()
                                           and value.strip().isdigit())


def parse_replication(value: object, module: str
                      ) -> tuple[tuple[ReplicaSpec, ...], tuple[MigrationPath, ...]]:
    """Replicas and migration paths of ``module`` from its ``replication`` value.

    A count of 0 gives no replicas and no paths (the module is called in the client:
    ``ModuleSpec.in_client``). Raises ConfigError (without file or key; the caller
    places it).
    """
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"expected a replica count or a replication string, got {value!r}",
                          hint=REPLICATION_FORMS)
    if isinstance(value, int):
        if value < 0:
            raise ConfigError(f"the replica count must be at least 0, got {value}",
                              hint=REPLICATION_FORMS)
        if value > MAX_REPLICAS:
            raise ConfigError(f"the replica count {value} is more than {MAX_REPLICAS}",
                              hint=REPLICATION_FORMS)
        return tuple(ReplicaSpec(f"{module}-{i}") for i in range(value)), ()
    word = value.strip()
    if _NAME.fullmatch(word) or _NUMBER_WORDS.fullmatch(word):
        mistake = _not_a_name(word)
        if mistake is not None:
            raise mistake
    parser = _Parser(value)
    parser.spec()
    replicas = tuple(ReplicaSpec(r.name, 1.0 if r.speed is None else r.speed,
                                 overload=r.overload, underload=r.underload)
                     for r in parser.replicas.values())
    return replicas, tuple(parser.paths)
