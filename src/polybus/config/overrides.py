"""``--set a.b.c=value`` (or ``polybus.run``'s overrides): changes to the parsed document,
applied before it is validated; a mistake is labelled by its origin (origin.py).

The key is a TOML dotted key (``bind."client.compare"`` quotes a part with a dot). The
value is read as a TOML value when it is one (``8``, ``"x"``, ``[1, 2]``, ``true``) and
taken as a bare string otherwise, so ``callstyle=async-demand(5)`` needs no quoting.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polybus.config.origin import PYTHON, SET, Origin
from polybus.config.problems import dotted, names_hint
from polybus.errors import ConfigError

__all__ = ["Overrides", "apply_overrides", "normalised", "override_value", "parse_key_path",
           "parse_override", "repeated", "toml_value"]

Overrides = Iterable[str] | Mapping[str, Any]


def parse_key_path(text: str, origin: Origin = SET) -> list[str]:
    """``modules.server.replication`` -> ``["modules", "server", "replication"]``."""
    bad = ConfigError(f"bad key path {text!r}", file=origin.label, key=text,
                      hint="a dotted key such as modules.server.replication")
    if not text.strip() or "\n" in text or "\r" in text or "=" in text or "#" in text:
        raise bad
    try:
        node: Any = tomllib.loads(f"{text} = 0")
    except tomllib.TOMLDecodeError:
        raise bad from None
    path: list[str] = []
    while isinstance(node, dict):
        if len(node) != 1:  # pragma: no cover - one key line makes one chain
            raise bad
        (k, node), = node.items()
        path.append(k)
    return path


def override_value(text: str) -> Any:
    """The ``VALUE`` of ``KEY=VALUE`` as an override takes it: a TOML value when it is
    one (``8``, ``"x"``, ``[10]``), else the bare string (``sync``, ``a#b``)."""
    return _value(text)


def _value(text: str) -> Any:
    raw = text.strip()
    # "a#b" is a migration path, not "a" plus a comment; only quoted forms may hold '#'.
    if "#" in raw and raw[:1] not in "\"'[{":
        return raw
    if "\n" in raw or "\r" in raw:
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):  # (nested past the parser's depth)
        return raw


def toml_value(value: Any, key: str = "") -> str:
    """A Python override's value written as TOML, so that ``KEY=<it>`` (as a worker's
    --set gets it) reads back the same value: a str stays a str (``"0"`` is not 0, an
    expression is not a number), a dict is a table, a tuple a list."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()  # a numpy scalar
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # (nan, inf and -inf are TOML too)
    if isinstance(value, str):  # a JSON string is a TOML basic string, DEL escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = "
                               f"{toml_value(v, key)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v, key) for v in value) + "]"
    raise ConfigError(f"a value of type {type(value).__name__} has no TOML form",
                      file=PYTHON.label, key=key or None,
                      hint="use str, int, float, bool, list or dict; leave the key out "
                           "for its default")


def parse_override(text: str, origin: Origin = SET) -> tuple[list[str], Any]:
    """``"a.b.c=value"`` -> (``["a", "b", "c"]``, value); ConfigError (labelled as from
    ``origin``) if bad."""
    key, sep, value = text.partition("=")
    if not sep:
        raise ConfigError(f"expected KEY=VALUE, got {text!r}", file=origin.label,
                          key=text.strip(),
                          hint=f"e.g. {origin.example('modules.server.replication', '8')}")
    return parse_key_path(key.strip(), origin), _value(value)


def normalised(path: list[str]) -> list[str]:
    # [bind] keys are "user.name" strings: bind.client.compare means bind."client.compare".
    if len(path) > 2 and path[0] == "bind":
        return ["bind", ".".join(path[1:])]
    return path


def apply_overrides(doc: dict[str, Any], overrides: Overrides, origin: Origin = SET,
                    made: set[str] | None = None) -> tuple[list[str], list[ConfigError]]:
    """Apply in order to ``doc`` (in place); the dotted keys that were set, and mistakes
    (labelled as from ``origin``).

    The keys set include the tables an override made (``use.<name>`` that the file does
    not have): a mistake found there is the override's, not the file's. ``made``, when
    given, gets the keys of the tables made only to hold a deeper key (``define`` for
    ``define.f.cache=...``), not those an override then set whole (``define={f = {}}``)."""
    pairs: list[tuple[list[str], Any]] = []
    errors: list[ConfigError] = []
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            try:
                pairs.append((parse_key_path(key, origin), value))
            except ConfigError as e:
                errors.append(e)
    else:
        for text in overrides:
            try:
                pairs.append(parse_override(text, origin))
            except ConfigError as e:
                errors.append(e)
    written: list[str] = []
    for path, value in pairs:
        path = normalised(path)
        full = dotted(*path)
        modules = doc.get("modules", {})
        if len(path) > 2 and path[0] == "modules" and isinstance(modules, dict) \
                and path[1] not in modules:  # (none at all: the table is not made)
            errors.append(ConfigError(
                f"no module {path[1]!r} to override", file=origin.label, key=full,
                hint=names_hint(path[1], list(modules), "modules")))
            continue
        node = doc
        for i, part in enumerate(path[:-1]):
            if part not in node:
                written.append(dotted(*path[: i + 1]))
                if made is not None:
                    made.add(dotted(*path[: i + 1]))
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                errors.append(ConfigError(f"cannot set {full}: {dotted(*path[: i + 1])} is "
                                          "not a table", file=origin.label, key=full))
                break
            node = child
        else:
            node[path[-1]] = value
            written.append(full)
            if made is not None:  # (a table set whole is the override's value, not made)
                made -= {k for k in made if k == full or k.startswith(full + ".")}
    return written, errors


def repeated(overrides: Sequence[str], origin: Origin = SET) -> list[str]:
    """A warning for each key more than one of ``overrides`` sets to different values,
    naming the one taken (the last: they apply in order), and for one set inside a
    table that a later one sets whole, which drops it. Both were silent. Those that do
    not parse are left to the configuration's check."""
    keys: list[tuple[list[str], str, str]] = []  # (path, as written, its value's repr)
    for text in overrides:
        try:
            path, value = parse_override(text, origin)
        except ConfigError:
            continue
        keys.append((normalised(path), text.strip(), repr(value)))
    out: list[str] = []
    said: set[str] = set()
    for i, (path, text, _) in enumerate(keys):
        key = dotted(*path)
        same = [(t, v) for p, t, v in keys[i:] if p == path]
        if key not in said and len({v for _, v in same}) > 1:
            said.add(key)
            times = "twice" if len(same) == 2 else f"{len(same)} times"
            out.append(f"{origin.label} {key} given {times}: the last, {same[-1][0]}, "
                       "is taken")
        whole = next(((p, t) for p, t, _ in keys[i + 1:] if len(p) < len(path)
                      and path[:len(p)] == p), None)
        if whole is not None:
            out.append(f"{origin.label} {text}: a later {origin.label} {whole[1]} sets "
                       f"{dotted(*whole[0])} whole, so this one is dropped")
    return out
