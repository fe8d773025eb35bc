"""`polybus sweep`'s command-line values: ``--vary KEY=v1,v2,...`` and ``--baseline
KEY=VALUE``, split where a comma is not inside brackets or quotes, and checked (a value
given twice, a key inside a table varied after it, a baseline key that matches no varied
key or more than one)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from polybus.errors import ConfigError, UsageError

__all__ = [
    "TIED",
    "check_nesting",
    "check_repeat",
    "overridden",
    "parse_baseline",
    "parse_varies",
    "parse_vary",
    "shown_values",
    "split_values",
    "typed",
    "varies_nothing",
]

TIED = "\0"  # leads a --tie's text in --vary's list (cli/cmd_sweep.py keeps their order)


def check_repeat(repeat: int) -> None:
    """UsageError unless ``--repeat`` asks for a run at least."""
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")


def check_nesting(keys: Sequence[str], tied: Collection[str]) -> None:
    """UsageError for a varied key inside a table varied after it: each run's overrides
    go in the order given, so the table, set whole, replaced the key's value in every
    run, and the key's cells differed in nothing but their label. (The table first, the
    key after it, sets the key in each of its tables.)"""
    for i, inner in enumerate(keys):
        for outer in keys[i + 1:]:
            if inner.startswith(outer + "."):
                option = "--tie" if outer in tied else "--vary"
                raise UsageError(f"{'--tie' if inner in tied else '--vary'} {inner}: "
                                 f"{option} {outer}, after it, sets the whole table in "
                                 f"every run, so its values would change nothing; give "
                                 f"{outer} before {inner} (the key is then set in each of "
                                 f"its tables), or vary one of them")


def overridden(fixed: Sequence[str], varies: Sequence[tuple[str, list[str]]]) -> list[str]:
    """A warning for each ``--set`` a ``--vary`` key overrides in every run (said, not
    dropped): the --set's key is or is inside a varied one; or it sets a table whole
    that holds a varied key, that key alone (the --set goes first, the rest holds)."""
    from polybus.config.overrides import parse_key_path, parse_override

    keys = [k for k, _ in varies]
    out = []
    for f in fixed:
        key = f.partition("=")[0].strip()
        if any(key == k or key.startswith(k + ".") for k in keys):
            out.append(f"--set {f}: --vary gives that key in every run")
            continue
        for k in (k for k in keys if k.startswith(key + ".")):
            try:  # (a bad one is said by the check of the configuration)
                node: Any = parse_override(f)[1]
                inner = parse_key_path(k)[len(parse_key_path(key)):]
            except ConfigError:
                continue
            for part in inner:
                node = node.get(part, _NONE) if isinstance(node, dict) else _NONE
            if node is not _NONE:
                out.append(f"--set {f}: --vary {k} gives its {'.'.join(inner)} in every run")
    return out


_NONE = object()  # (a key a --set table does not hold)


def split_values(text: str, where: str) -> list[str]:
    """``"1,2,[3,4]"`` -> ``["1", "2", "[3,4]"]``: commas inside brackets or quotes stay
    (a double-quoted string's ``\\"`` does not end it, as in TOML).
    ``where`` (``--vary KEY``, ``--baseline``) leads the error of an empty value."""
    out: list[str] = []
    cur: list[str] = []
    depth, quote, escaped = 0, "", False
    for ch in text:
        if escaped:  # (the character after a basic string's backslash: \" does not end it)
            escaped = False
        elif quote:
            escaped = quote == '"' and ch == "\\"
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    if "" in out:
        raise UsageError(f"{where}: no value given" if len(out) == 1 else
                         f"{where}: empty value in {text!r} (value {out.index('') + 1} of {len(out)})")
    return out


def parse_vary(text: str, option: str = "--vary") -> tuple[str, list[str]]:
    """``"modules.server.replication=1,2,4"`` -> (key, ["1", "2", "4"])."""
    key, sep, values = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{option} expects KEY=v1,v2,..., got {text!r}")
    vals = split_values(values, f"{option} {key.strip()}")
    seen: dict[str, str] = {}  # as the run reads it -> as first written
    twice: set[str] = set()
    for v in vals:  # (``sync`` and ``"sync"`` are one value: the run reads both alike)
        read = _as_read(v)
        if read in seen:
            twice.add(v if v == seen[read] else f"{v} (as {seen[read]})")
        else:
            seen[read] = v
    if twice and option == "--vary":  # (two cells of one combination: which is the baseline's?)
        raise UsageError(f"--vary {key.strip()}: {', '.join(sorted(twice))} given twice")
    return key.strip(), vals


def varies_nothing(varies: Sequence[tuple[str, list[str]]],
                   tied: Collection[str]) -> list[str]:
    """A warning for each --vary of one value (its --tie follows it): every run sets it
    so, as a --set would, and its column is one value; it was silent."""
    return [f"--vary {key}={vals[0]}: one value, so it varies nothing (every run sets it "
            "so, as --set would); give two or more"
            for key, vals in varies if key not in tied and len(vals) == 1]


def parse_varies(texts: Sequence[str]) -> tuple[list[tuple[str, list[str]]], frozenset[str]]:
    """--vary and --tie, in the order given: every key with its values, and the keys
    that move with the key before them, value for value (``--vary
    modules.server.replication=1,2,4 --tie 'modules.client.args=[9,1],[9,2],[9,4]'``:
    three combinations, not nine)."""
    varies: list[tuple[str, list[str]]] = []
    tied: set[str] = set()
    for text in texts:
        if not text.startswith(TIED):
            varies.append(parse_vary(text))
            continue
        key, vals = parse_vary(text[len(TIED):], "--tie")
        if key in dict(varies):
            raise UsageError(f"--tie {key}: it is varied already; a key is given once, to "
                             "--vary or to --tie")
        if not varies:
            raise UsageError(f"--tie {key}: give it after the --vary whose values it follows")
        before, its = varies[-1]
        if len(vals) != len(its):
            raise UsageError(f"--tie {key}: {len(vals)} value(s) to follow --vary {before}'s "
                             f"{len(its)}; give one for each")
        varies.append((key, vals))
        tied.add(key)
    return varies, frozenset(tied)


def _match_key(short: str, keys: Sequence[str]) -> str:
    from polybus.config.problems import nearest

    hits = [k for k in keys if k == short or k.endswith("." + short)]
    if len(hits) != 1:
        what = "no" if not hits else "more than one"
        # (misspelt: the varied key as it was written, as many last parts, or whole)
        parts = short.count(".") + 1
        hint = None if hits else nearest(short, [".".join(k.split(".")[-parts:])
                                                 for k in keys] + list(keys))
        raise UsageError(f"--baseline key {short!r} matches {what} --vary key "
                         f"(varied: {', '.join(keys)}){'; ' + hint if hint else ''}")
    return hits[0]


def parse_baseline(text: str | None, varies: Sequence[tuple[str, list[str]]]) -> dict[str, str]:
    """``"replication=1"`` (a varied key or its last parts) -> {full key: value}.

    Without one, the baseline is the first value of the first varied key.
    """
    keys = [k for k, _ in varies]
    if not text:
        return {keys[0]: varies[0][1][0]} if keys else {}
    out = {}
    for part in split_values(text, "--baseline"):
        short, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"--baseline expects KEY=VALUE[,KEY=VALUE...], got {text!r} "
                             f"({part!r} has no '='; a baseline is one value of each key)")
        key = _match_key(short.strip(), keys)
        allowed = dict(varies)[key]
        same = _same_value(value.strip(), allowed)
        if same is None:
            raise UsageError(f"--baseline {key}={value.strip()} is not among the varied "
                             f"values {', '.join(allowed)}")
        out[key] = same
    return out


def _same_value(text: str, allowed: Sequence[str]) -> str | None:
    """The varied value of ``allowed`` that ``text`` is, as written or as the run's
    override reads both (``async`` is ``"async"``, ``'10s'`` is ``"10s"``; ``"1"``, a
    string, is not ``1``, nor is ``1.0``): None for none. The text was compared alone,
    and a baseline written with the quotes its --vary left out was refused."""
    if text in allowed:
        return text
    want = _as_read(text)
    return next((v for v in allowed if _as_read(v) == want), None)


def _as_read(text: str) -> str:
    """A value as the run's override reads it, to compare (repr: ``1``, ``1.0``,
    ``True`` and ``"1"`` stay apart)."""
    from polybus.config.overrides import override_value

    return repr(override_value(text))


def typed(text: str) -> Any:
    """A varied value as the run's override took it, for --json: ``1``, ``"sync"``,
    ``[10]`` (``"1"``, ``"sync"``, ``"[10]"`` as written). One JSON has no form for (a
    TOML date, an infinity) stays as written."""
    from polybus.config.overrides import override_value

    value = override_value(text)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return text
    return value


def shown_values(values: Sequence[str]) -> dict[str, str]:
    """Each of a key's varied values as the table, the CSV, the plot and the progress
    show it: a string as the string (``"a:speed=0.5,b"`` typed shows ``a:speed=0.5,b``,
    as ``sync`` typed bare shows ``sync``), any other value as typed; as typed, every
    one, when two would then read alike (``2`` and ``"2"``)."""
    from polybus.config.overrides import override_value

    out = {}
    for v in values:
        value = override_value(v)
        out[v] = value if isinstance(value, str) else v
    return out if len(set(out.values())) == len(out) else {v: v for v in values}
