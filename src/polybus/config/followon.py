"""A misspelt table name and the errors that only follow from it, folded into its own.

``[binds]`` for ``[bind]`` leaves every use unbound, and ``[modules.clint]`` for the
``client`` the bindings name leaves every binding without its module: each of those is a
mistake too, and listed after the misspelling they bury it. Which of them follow from it
is found by checking the configuration again with the name as it was likely meant (the
nearest known one, `closest`): an error that is gone then follows from the misspelling,
and is counted in the misspelling's own hint ("3 more errors follow from it; fix it
first") instead of listed; an error still there is listed as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from polybus.config.bind import flatten_bind
from polybus.config.keys import TOP_KEYS
from polybus.config.problems import closest, dotted
from polybus.errors import ConfigError
from polybus.plural import plural

__all__ = ["fold_follow_ons"]

Check = Callable[[dict[str, Any]], list[ConfigError]]


@dataclasses.dataclass(frozen=True)
class _Meant:
    """A name written ``written`` that was likely meant as ``meant``: ``doc`` is the
    document with it so, and ``top`` whether it is a top-level table's (else a module's)."""

    written: str
    meant: str
    doc: dict[str, Any]
    top: bool

    def cause(self, gone: list[ConfigError]) -> ConfigError | None:
        """Of the errors ``gone`` with the name as meant, the one that says the
        misspelling: the unknown key, or the first that suggests the written module name."""
        if self.top:
            return next((e for e in gone if e.key == dotted(self.written)), None)
        said = f"did you mean {self.written!r}?"
        return next((e for e in gone if e.hint is not None and e.hint.startswith(said)), None)

    def as_written(self, key: str | None) -> str | None:
        """A key of the document as meant, as the document written has it."""
        if key is None or self.top:
            return key
        was, now = dotted("modules", self.meant), dotted("modules", self.written)
        if key == was or key.startswith(was + "."):
            return now + key[len(was):]
        was, now = f'bind."{self.meant}.', f'bind."{self.written}.'  # (an unbound use())
        return now + key[len(was):] if key.startswith(was) else key


def _renamed(table: dict[str, Any], written: str, meant: str) -> dict[str, Any]:
    """``table`` with its key ``written`` called ``meant``, in the same place."""
    return {meant if k == written else k: v for k, v in table.items()}


def _named_modules(doc: dict[str, Any]) -> set[str]:
    """The module names [bind] gives, on either side, and [serve]'s routes."""
    names: set[str] = set()
    bind = doc.get("bind")
    for left, right in flatten_bind(bind) if isinstance(bind, dict) else ():
        names.add(left.partition(".")[0])
        if isinstance(right, str):
            names.add(right.partition(".")[0])
    serve = doc.get("serve")
    routes = serve.get("routes") if isinstance(serve, dict) else None
    for v in routes.values() if isinstance(routes, dict) else ():
        target = v.get("to") if isinstance(v, dict) else v
        if isinstance(target, str):
            names.add(target.partition(".")[0])
    return names


def _likely_meant(doc: dict[str, Any]) -> list[_Meant]:
    """Each table name of ``doc`` that is unknown where a known one near it is not
    there: a top-level table's (``binds``), a module's that nothing names while the
    bindings name a module that is not there near it (``clint`` for ``client``)."""
    found = []
    for k in doc:
        meant = closest(k, TOP_KEYS) if k not in TOP_KEYS else None
        if meant is not None and meant not in doc:
            found.append(_Meant(k, meant, _renamed(doc, k, meant), top=True))
    modules = doc.get("modules")
    if not isinstance(modules, dict):
        return found
    named = _named_modules(doc)
    unnamed = [m for m in modules if m not in named]
    for name in sorted(n for n in named if n and n not in modules):
        written = closest(name, unnamed)
        if written is not None:
            unnamed.remove(written)
            found.append(_Meant(written, name, {**doc, "modules": _renamed(
                modules, written, name)}, top=False))
    return found


def fold_follow_ons(doc: dict[str, Any], errors: list[ConfigError], check: Check
                    ) -> list[ConfigError]:
    """``errors`` (of ``doc``) with those that follow from a misspelt table name left out
    and counted in its own error's hint; ``check`` gives the errors of a document."""
    kept = list(errors)
    causes: list[ConfigError] = []
    for meant in _likely_meant(doc):
        still = {meant.as_written(e.key) or e.bare_message for e in check(meant.doc)}
        own = None if meant.top else dotted("modules", meant.written)  # (its name said bad)
        gone = [e for e in kept if (e.key or e.bare_message) not in still
                and e.key != own and not any(e is c for c in causes)]
        cause = meant.cause(gone)
        if cause is None or len(gone) < 2:
            continue
        n = len(gone) - 1
        said = f"{plural(n, 'more error')} {'follows' if n == 1 else 'follow'} from it; fix it first"
        folded = ConfigError(cause.bare_message, file=cause.file, key=cause.key,
                             hint=f"{cause.hint} {said}" if cause.hint else said)
        causes.append(folded)
        kept = [folded if e is cause else e for e in kept
                if e is cause or not any(e is g for g in gone)]
    return kept
