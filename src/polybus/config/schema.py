"""The shape of the TOML file: which tables and keys exist and what type each value has.

Each ``parse_*`` turns one table into its typed spec, reporting every mistake to
``Problems`` and carrying on with the default, so one pass finds them all (its typed
reads: table.py). Checks that need more than one table (sources, bindings, replica
counts) are in ``bind``.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

from polybus.config.callstyle import parse_callstyle
from polybus.config.cpus import parse_cpus
from polybus.config.files import NUL_SAID, config_file, has_nul, not_a_file
from polybus.config.forwardopt import parse_forward, refuse_keep
from polybus.config.keys import (
    CLUSTER_KEYS,
    DEFINE_HINTS,
    DEFINE_KEYS,
    MODULE_KEYS,
    TOP_KEYS,
    USE_HINTS,
    USE_KEYS,
    module_hints,
)
from polybus.config.model import (
    CallStyle,
    DefineSpec,
    MigrationPath,
    ModuleSpec,
    ReplicaSpec,
    UseSpec,
)
from polybus.config.pool import parse_pool
from polybus.config.problems import Problems, describe, dotted, names_array
from polybus.config.replication import given_as_names, parse_replication
from polybus.config.table import Table, pick
from polybus.config.units import parse_duration, parse_size, shown
from polybus.errors import ConfigError
from polybus.transport.spinning import SPIN_S

__all__ = [
    "CLUSTER_KEYS", "DEFINE_KEYS", "FILE_CUTOFF", "MODULE_KEYS", "TOP_KEYS", "USE_KEYS",
    "nearest_file", "parse_module", "source_file", "swapped",
]

TRANSPORTS = ("tcp", "ipc", "shm")  # (not inproc: a module's replicas are processes)
ENGINES = ("local", "hosts", "mpi", "ray")
_MODULE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A batch is one frame, cut at max_frame and at its linger whatever the count: a count
# past a million calls is a typo (1e20 as an integer was taken, and meant nothing).
MAX_AGGREGATE = 1_000_000
AGGREGATE_FORMS = (f"a number of calls from 1 to {MAX_AGGREGATE:,} or a size such as "
                   "'64KiB' (0 or '0B': off)")
# Sanity bounds, each said with the value in the message (a pool's: pool.py). A
# heartbeat is a reader's wait at most (poll takes whole milliseconds in a C int: 24.8 days), a linger the
# linger timer's sleep (time_t): one of days means never, and past those bounds the
# run failed with an OverflowError.
LONGEST = (86400.0, "'24h'")  # cluster.heartbeat, use.linger


def _replication_hint(table: dict[str, Any], path: tuple[str, ...], p: Problems) -> str:
    """Where ``define.f.replication`` goes: the module's key (MIL writes it on the
    define interface statement, so a MIL user looks for it there)."""
    module = dotted(*path[:2], "replication")
    by = p.override(dotted(*path, "replication"))
    value = table.get("replication")
    where = module
    if by is not None and isinstance(value, int | str) and not isinstance(value, bool):
        where = by.example(module, json.dumps(value))  # (--set modules.server.replication=3)
    hint = f"replication belongs to the module, not an interface: {where}"
    if p.mil is not None:
        hint += "; MIL writes it on the define interface statement, but it is the module's"
    return hint


def parse_define(table: dict[str, Any], path: tuple[str, ...], p: Problems) -> DefineSpec:
    hints = DEFINE_HINTS
    if "replication" in table:
        hints = {**DEFINE_HINTS, "replication": _replication_hint(table, path, p)}
    p.unknown_keys(table, DEFINE_KEYS, *path, extra_hints=hints)
    t = Table(table, path, p)
    d = DefineSpec()
    pool, pool_kind = t.parsed("pool", parse_pool) or (d.pool, d.pool_kind)
    cache: tuple[str, ...] | Literal["auto"] | None = None
    if t.has("cache"):
        raw = table["cache"]
        if raw == "auto":
            cache = "auto"
        elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            cache = tuple(raw) or None
        else:
            p.wrong_type("'auto' or an array of parameter names", raw, t.key("cache"),
                         names_array(raw, "cache", ["auto"]))
    cache_bytes = t.parsed("cache_bytes", parse_size)
    if cache_bytes == 0:  # (the LRU would still keep one operand: not what 0 says)
        p.add(f"expected a size > 0, got {shown(table['cache_bytes'])}", t.key("cache_bytes"),
              hint="to cache nothing, leave `cache` out of this interface")
        cache_bytes = None
    return DefineSpec(
        priority=_priority(t),
        pool=pool,
        pool_kind=pool_kind,
        queue=pick(t.integer("queue", 1), d.queue),
        overflow=cast(Literal["block", "reject"],
                      pick(t.string("overflow", ("block", "reject")), d.overflow)),
        cache=cache,
        cache_bytes=pick(cache_bytes, d.cache_bytes),
        prefetch=cast(Literal["all"] | None, t.string("prefetch", ("all",))),
        timeout=t.positive_duration("timeout"),
        idempotent=pick(t.boolean("idempotent"), d.idempotent),
        cache_bytes_set=cache_bytes is not None,
    )


def _priority(t: Table) -> str | None:
    """An expression string: a bare ``priority = 0`` is the usual slip, so show the quoting."""
    raw = t.t.get("priority")
    if raw is None or isinstance(raw, str):
        return raw
    key = t.key("priority")
    text = str(raw).lower() if isinstance(raw, int | float) else "len(query)"
    if isinstance(raw, float) and not math.isfinite(raw):  # ("inf" would be a name)
        text = "len(query)" if math.isnan(raw) else ("-1e309" if raw < 0 else "1e309")
    by = t.p.override(key)
    hint = by.string_hint(key, text) if by else f'write it quoted: priority = "{text}"'
    t.p.add(f"expected an expression string, got {describe(raw)}", key,
            f"the priority is a Python expression over the call's parameters; {hint}")
    return None


def _loadratio(t: Table) -> tuple[float, ...] | None:
    if not t.has("loadratio"):
        return None
    raw = t.t["loadratio"]
    forms = "a string such as '1:2:4' or an array of numbers such as [1, 2, 4]"
    parts: list[Any]
    if isinstance(raw, str):
        parts = raw.split(":")
        try:
            numbers = [float(x) for x in parts]
        except ValueError:
            t.p.add(f"not a load ratio: {raw!r}", t.key("loadratio"), forms)
            return None
    elif isinstance(raw, list) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in raw):
        numbers = [float(x) for x in raw]
    else:
        t.p.wrong_type(forms, raw, t.key("loadratio"))
        return None
    # (NaN gave its replica no call, inf or a sum past a float skewed the split: the
    # rotation adds and subtracts the shares and their sum, client/policies/balance.py)
    finite = all(math.isfinite(x) for x in numbers)
    if not finite or not math.isfinite(sum(numbers)):
        t.p.add(f"a load ratio's shares are finite numbers, got {raw!r}"
                + ("" if not finite else " (their sum is not)"), t.key("loadratio"), forms)
        return None
    if not numbers or any(x < 0 for x in numbers) or not any(x > 0 for x in numbers):
        t.p.add(f"a load ratio needs shares >= 0, at least one > 0; got {raw!r}",
                t.key("loadratio"), forms)
        return None
    return tuple(numbers)


BALANCES = ("none", "steal", "least")


def parse_use(table: dict[str, Any], path: tuple[str, ...], p: Problems) -> UseSpec:
    p.unknown_keys(table, USE_KEYS, *path, extra_hints=USE_HINTS)
    t = Table(table, path, p)
    u = UseSpec()
    aggregate: int | None = None
    aggregate_bytes: int | None = None
    if t.has("aggregate"):
        raw = table["aggregate"]
        if isinstance(raw, int) and not isinstance(raw, bool):
            if 1 <= raw <= MAX_AGGREGATE:
                aggregate = raw
            elif raw != 0:  # (0: off, as no key; both forms said: a size is as good a fix)
                p.add(f"expected {AGGREGATE_FORMS}, got {shown(raw)}", t.key("aggregate"))
        elif isinstance(raw, str):
            aggregate_bytes = t.parsed("aggregate", parse_size) or None  # ("0KiB": off, as 0)
        else:
            p.wrong_type(AGGREGATE_FORMS, raw, t.key("aggregate"))
    linger = t.parsed("linger", parse_duration)
    if linger is not None and linger > LONGEST[0]:
        p.add(f"expected a duration of at most {LONGEST[1]}, got {shown(table['linger'])}",
              t.key("linger"))
        linger = None
    callstyle = pick(t.parsed("callstyle", parse_callstyle), CallStyle())
    loadratio = _loadratio(t)
    balance = cast(Literal["none", "steal", "least"],
                   pick(t.string("balance", BALANCES), u.balance))
    if balance == "least" and callstyle.kind == "async-demand":
        p.note(f'balance = "least" has no effect under callstyle = "{callstyle}": demand '
               "already hands each call to the least loaded replica with room", t.key("balance"))
    elif balance == "least" and loadratio is not None:
        p.add('balance = "least" sends each call to the least loaded replica, and a loadratio '
              "splits calls by share: they cannot both decide", t.key("balance"),
              "keep one of them")
    forward = parse_forward(t)
    if forward == "keep":
        refuse_keep(t, callstyle, aggregate is not None or aggregate_bytes is not None, balance)
    return UseSpec(
        callstyle=callstyle,
        loadratio=loadratio,
        balance=balance,
        aggregate=aggregate,
        aggregate_bytes=aggregate_bytes,
        linger=pick(linger, u.linger),
        timeout=t.positive_duration("timeout"),
        transport=_transport(t),
        forward=pick(forward, u.forward),
        check_calls=pick(t.boolean("check_calls"), u.check_calls),
    )


def _transport(t: Table) -> str | None:
    """A module's or a binding's transport; inproc said as what it is (not for replicas)."""
    if t.t.get("transport") != "inproc":
        return t.string("transport", TRANSPORTS)
    t.p.add(f"expected one of {', '.join(map(repr, TRANSPORTS))}, got 'inproc'",
            t.key("transport"), "inproc:// is for a listener and its connections within one "
            "process, in tests; replicas run as processes of their own: 'ipc' or 'shm' for "
            "this host")
    return None


def _sub_tables(t: Table, k: str, what: str) -> dict[str, dict[str, Any]]:
    """``define.<iface>`` / ``use.<name>``: a table of tables."""
    outer = t.table(k)
    result: dict[str, dict[str, Any]] = {}
    for name, v in (outer or {}).items():
        if isinstance(v, dict):
            result[name] = v
        else:
            t.p.wrong_type(f"a table of {what} options", v, dotted(*t.path, k, name))
    return result


def _names(table: dict[str, Any], k: str, more: Sequence[str]) -> list[str]:
    sub = table.get(k)
    return list(dict.fromkeys([*(sub if isinstance(sub, dict) else ()), *more]))


def source_file(base_dir: Path, source: str) -> Path:
    """The file a module's ``source`` names: relative to ``base_dir``, the
    configuration's directory (files.py; ``source`` holds no NUL)."""
    return config_file(base_dir, source)


SOURCE_HINT = "the module's Python file, relative to the configuration file"


def parse_module(key: str, table: dict[str, Any], base_dir: Path, p: Problems,
                 used: Sequence[str] = (), served: Sequence[str] = ()) -> ModuleSpec:
    """One ``[modules.<key>]`` table; source existence is checked, its contents are not.

    ``used`` / ``served``: the interfaces [bind] says it uses / serves, named in the hint
    for an interface option written on the module itself."""
    path = ("modules", key)
    if not _MODULE_KEY.match(key):
        p.add(f"bad module name {key!r}", dotted(*path),
              "ASCII letters (a-z, A-Z), digits, '_' and '-', starting with a letter or '_'")
    p.unknown_keys(table, MODULE_KEYS, *path, extra_hints=module_hints(
        key, _names(table, "use", used), _names(table, "define", served)))
    t = Table(table, path, p)
    source = base_dir
    raw_source = t.string("source")
    if raw_source is None and "source" not in table:
        p.add("missing key 'source'", dotted(*path), SOURCE_HINT)
    elif raw_source is not None and has_nul(raw_source):
        p.add(f"source {raw_source!r} {NUL_SAID}", t.key("source"), SOURCE_HINT)
    elif raw_source is not None:
        source = source_file(base_dir, raw_source)
        why = not_a_file(source)
        if why == "not found":
            p.add(f"source file {raw_source!r} not found (looked for {str(source)!r})",
                  t.key("source"), nearest_file(raw_source, source))
        elif why is not None:  # (a directory, a device: it was said "not found")
            at = "" if str(source) == raw_source else f" ({str(source)!r})"
            p.add(f"source {raw_source!r}{at} {why}", t.key("source"), SOURCE_HINT)
    entrypoint = t.string("entrypoint")
    replicas: tuple[ReplicaSpec, ...] = ()
    paths: tuple[MigrationPath, ...] = ()
    in_client = named = False
    if "replication" in table:
        try:
            replicas, paths = parse_replication(table["replication"], key)
            in_client = not replicas  # (0: called in the client, client/inclient.py)
            named = given_as_names(table["replication"])
        except ConfigError as e:
            p.add_error(e, t.key("replication"))
    elif "entrypoint" not in table:
        replicas, paths = parse_replication(1, key)
    define = {name: parse_define(v, (*path, "define", name), p)
              for name, v in _sub_tables(t, "define", "define").items()}
    use = {name: parse_use(v, (*path, "use", name), p)
           for name, v in _sub_tables(t, "use", "use").items()}
    args: tuple[Any, ...] = ()
    if "args" in table:
        if isinstance(table["args"], list):
            args = tuple(table["args"])
        else:
            given, at = table["args"], t.key("args")
            p.wrong_type("an array", given, at, "arguments by name go in kwargs, a table"
                         if isinstance(given, dict) else p.one_in_array(
                             given, at, "args is the list of the entrypoint's arguments"))
    return ModuleSpec(
        key=key,
        source=source,
        replication=replicas,
        named=named,
        in_client=in_client,
        migration=paths,
        define=define,
        use=use,
        entrypoint=entrypoint,
        args=args,
        kwargs=pick(t.table("kwargs"), {}),
        transport=cast(Literal["tcp", "ipc", "shm"], pick(_transport(t), "tcp")),
        pickle=pick(t.boolean("pickle"), False),
        spin=_spin(t),
        coalesce=_coalesce(t),
        cpus=pick(t.parsed("cpus", parse_cpus), ()),
    )


# How alike two file names' stems must be (difflib's ratio) for one to be offered for
# the other. The whole names at 0.6 offered 'osexit.py' for 'nonexist.py' (".py" alike
# in both made up most of it); stems at 0.8 keep a letter left out, doubled or changed
# in a name of five letters or more, and `swapped` two letters in any.
FILE_CUTOFF = 0.8


def nearest_file(written: str, looked: Path) -> str | None:
    """The Python file beside ``looked`` (a source not found) whose name is a likely typo
    of it (by stem, case aside: `FILE_CUTOFF`), said as ``written`` would say it, or
    None."""
    try:
        names = [f.name for f in looked.parent.iterdir() if f.suffix == ".py" and f.is_file()]
    except OSError:  # (no such directory: nothing to suggest)
        return None
    stems: dict[str, str] = {}
    for n in sorted(names):
        stems.setdefault(n[:-3].casefold(), n)
    stem = looked.name.removesuffix(".py").casefold()
    found = difflib.get_close_matches(stem, list(stems), n=1, cutoff=FILE_CUTOFF) or [
        s for s in stems if swapped(stem, s)][:1]
    return f"did you mean {str(Path(written).with_name(stems[found[0]]))!r}?" if found else None


def swapped(a: str, b: str) -> bool:
    """``b`` is ``a`` with two neighbouring letters swapped (mian: main)."""
    if len(a) != len(b) or a == b:
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] \
        and a[diff[1]] == b[diff[0]]


def _spin(t: Table) -> float:
    """``spin``: how long a waiting reader polls before it sleeps (transport/spinning.py)."""
    v = t.parsed("spin", parse_duration)
    if v is not None and v > 0.01:
        t.p.add(f"a spin of {shown(t.t['spin'])} ({v:g} s) would burn a CPU for nothing",
                t.key("spin"),
                "at most '10ms'; '0' to block at once")
        return SPIN_S
    return pick(v, SPIN_S)


def _coalesce(t: Table) -> float:
    """``coalesce``: how long a replica may hold back the bell of an answer while more
    of the client's calls wait in its queue (worker/bells.py); 0, the default: none."""
    v = t.parsed("coalesce", parse_duration)
    if v is not None and 0 < v < 1e-6:
        t.p.add(f"a coalesce of {shown(t.t['coalesce'])} ({v:g} s) is less than the 1 us "
                "it is counted in",
                t.key("coalesce"), "'0' for none, or at least '1us'")
        return 0.0
    if v is not None and v > 1.0:
        t.p.add(f"a coalesce of {shown(t.t['coalesce'])} ({v:g} s) would leave answers "
                "unread for that long",
                t.key("coalesce"), "at most '1s'; a few times a call's time is enough")
        return 0.0
    return pick(v, 0.0)


def is_identifier(name: str) -> bool:
    return bool(_IDENTIFIER.match(name))
