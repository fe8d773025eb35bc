"""Settings a replica applies itself, as it registers them and as a run compares them.

A run that uses a running registry (``--registry``) starts no worker: each replica it
finds was started by ``polybus worker`` with its own settings (``--config`` and its
``--set``, or none with ``--module``), which may not be this run's. So each worker
registers the values it applies (`applied`: ``Replica.settings``), and the client,
once it has chosen a module's replicas, compares them with what this run's
configuration gives each of them by its name (`differences`), and says each that
differs (client/handsettings.py).

What a replica applies, by key (relative to its module): each interface's
``define.<f>.pool`` (its own limit, and its kind: threads or processes), and of one of
processes ``define.<f>.idempotent`` (the pool runs again a call whose child died, unless
not idempotent: worker/procpool.py); the
replica's one queue (``queue``: the largest of its defines'), what a full one does
(``overflow``: "reject" if any define asks for it) and its operand cache's bound
(``cache_bytes``: `ModuleSpec.cache_bytes`); whether its codec takes pickled values
(``pickle``: a replica without it drops a connection that sends one, and a client
without it one that answers with one); how long it polls for a next call after
answering (``spin``; none with ``coalesce`` over shm); its ``cpus`` (`ModuleSpec.cpus_of` its
name), its ``speed`` (of ``replication``, the replica of its name; 1 under another
name), and whether it orders calls by their priority (``priority``: `ORDERED` if any of
its defines has one, or its pool is more than one, or it has no configuration; else it
runs the calls in its shm ring as they come, worker/direct.py), compared only where this
run's defines give priorities and its calls reach the replica by an shm ring (the
module's transport, a binding's own, or TCP where the replica offers no shm) whose
bells this run does not hold back (``coalesce``: its calls then wait in the queue). The rest of a serving module's settings are the client's
to apply and take effect as ever: how to call, what to cache, timeouts, retries, each
call's priority (the client computes it); ``replication``'s names and count choose which of the registered
replicas the run uses (client/choosing.py); ``transport`` is chosen per replica from
what it offers (client/dialing.py says when it cannot be had).

Each value is canonical text: the same settings give the same text, on any host, and it
reads as the configuration writes it (``"processes:2"``, ``"512MiB"``, ``"0-3"``).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

from polybus.config.cpus import cpu_list
from polybus.config.model import DefineSpec, ModuleSpec
from polybus.config.problems import dotted
from polybus.config.units import duration_text
from polybus.registry.limits import SETTING_MAX
from polybus.transport.spinning import SPIN_S

__all__ = ["ORDERED", "Differs", "applied", "differences", "registered", "setting_key", "size_text"]

# ``priority``: whether a replica orders the calls it is sent by their priorities
ORDERED, AS_THEY_COME = "ordered", "as they come"

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size_text(n: int) -> str:
    """A size as the configuration writes one, exactly: ``"512MiB"``, ``"1000B"``."""
    for unit, size in _UNITS:
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def _coalescing(spec: ModuleSpec) -> bool:
    """Its replicas spin not at all (worker/main.py `options_for`)."""
    return bool(spec.coalesce) and spec.transport == "shm"


def _pool(d: DefineSpec) -> str:
    return str(d.pool) if d.pool_kind == "threads" else f"processes:{d.pool}"


def applied(spec: ModuleSpec | None, name: str, interfaces: Iterable[str] = ()) -> dict[str, str]:
    """What replica ``name`` of ``spec`` applies itself, by key (the module's docstring):
    as a worker of that configuration applies it (worker/main.py `options_for`,
    `place`). ``spec`` None (a worker of ``--module``): the defaults, each of
    ``interfaces`` (those it serves) at its define's defaults."""
    defines = dict(spec.define) if spec is not None else {f: DefineSpec() for f in interfaces}
    out = {dotted("define", f, "pool"): _pool(d) for f, d in defines.items()}
    # (a process pool runs again a call whose child died, unless not idempotent: its own)
    out.update((dotted("define", f, "idempotent"), "true" if d.idempotent else "false")
               for f, d in defines.items() if d.pool_kind == "processes")
    given = list(defines.values())
    out["queue"] = str(max((d.queue for d in given), default=DefineSpec.queue))
    out["overflow"] = "reject" if any(d.overflow == "reject" for d in given) else "block"
    out["cache_bytes"] = size_text(spec.cache_bytes if spec is not None
                                   else DefineSpec.cache_bytes)
    out["pickle"] = "true" if spec is not None and spec.pickle else "false"
    # (worker/direct.py: with no define ordering by priority and one handler, the calls
    # in an shm ring run as they come)
    out["priority"] = (ORDERED if spec is None or any(d.priority for d in given)
                       or max((d.pool for d in given), default=1) > 1 else AS_THEY_COME)
    out["spin"] = duration_text(SPIN_S if spec is None else 0.0 if _coalescing(spec)
                                else spec.spin)
    cpus = spec.cpus_of(name) if spec is not None else None
    out["cpus"] = cpu_list(cpus) if cpus else "[]"
    speed = next((r.speed for r in spec.replication if r.name == name),
                 1.0) if spec is not None else 1.0
    out["speed"] = repr(float(speed))
    return out


def registered(spec: ModuleSpec | None, name: str, interfaces: Iterable[str] = ()
               ) -> dict[str, str]:
    """`applied`, as the worker registers it (``Replica.settings``): but for a value
    longer than the registry takes (a CPU list of thousands of CPUs), left out and so not
    compared, rather than the worker refused for it."""
    return {k: v for k, v in applied(spec, name, interfaces).items() if len(v) <= SETTING_MAX}


def setting_key(spec: ModuleSpec, key: str) -> str:
    """The configuration's key (dotted, from ``modules``) that gives ``spec``'s value of
    setting ``key`` (an `applied` key): for the replica's queue, overflow and cache bound,
    the first define that gives the value the replica takes (the largest queue, a
    "reject"), else the first define's key, which the caller finds written or not."""
    base = ["modules", spec.key]
    if key == "speed":
        return dotted(*base, "replication")
    if key in ("cpus", "pickle"):
        return dotted(*base, key)
    if key == "spin":
        return dotted(*base, "coalesce" if _coalescing(spec) else "spin")
    named = {f: d for f, d in spec.define.items() if not d.filled} or dict(spec.define)
    first = next(iter(named), None)
    if key == "priority":  # (the first define that orders by one)
        first = next((f for f, d in named.items() if d.priority), first)
    elif key == "queue":
        top = max((d.queue for d in named.values()), default=DefineSpec.queue)
        first = next((f for f, d in named.items() if d.queue == top), first)
    elif key == "overflow":
        first = next((f for f, d in named.items() if d.overflow == "reject"), first)
    elif key == "cache_bytes":
        chosen = ({f: d for f, d in named.items() if d.cache}  # (as ModuleSpec.cache_bytes)
                  or {f: d for f, d in named.items() if d.cache_bytes_set})
        first = next((f for f, d in chosen.items() if d.cache_bytes == spec.cache_bytes),
                     first)
    else:  # (define.<f>.pool, define.<f>.idempotent: itself)
        return dotted(*base) + "." + key
    return dotted(*base, "define", first, key) if first is not None else dotted(*base, "define")


SHOWN = 120  # characters of a value said whole (a peer registers up to 16 KiB of one)


def _shown(value: str) -> str:
    """``value``, or its start and its length when it is longer than `SHOWN`."""
    return value if len(value) <= SHOWN else f"{value[:SHOWN]}... ({len(value)} characters)"


@dataclass(frozen=True)
class Differs:
    """Setting ``key`` of a module differs at replicas started by hand: ``at`` holds, for
    each replica concerned (by name, in the order given), its value and this run's."""

    key: str
    at: dict[str, tuple[str, str]]

    def text(self) -> str:
        """``server-0, server-1 have 2 where this run's configuration gives 4`` (with a
        clause for each pair of values, as speeds and cpus differ by replica)."""
        pairs: dict[tuple[str, str], list[str]] = {}
        for name, pair in self.at.items():
            pairs.setdefault(pair, []).append(name)
        return "; ".join(
            f"{', '.join(names)} {'has' if len(names) == 1 else 'have'} {_shown(theirs)} "
            f"where this run's configuration gives {_shown(ours)}"
            for (theirs, ours), names in pairs.items())

    def kind(self) -> str:
        """What `text` says but the replicas' names: the same difference of other
        replicas (runs that take them in turn) is one warning (saidonce.py)."""
        return f"{self.key}: " + "; ".join(
            f"{theirs} for {ours}" for theirs, ours in sorted(set(self.at.values())))


def differences(spec: ModuleSpec, replicas: Sequence[tuple[str, Mapping[str, str]]],
                rings: Container[str] | None = None) -> list[Differs]:
    """Each setting of ``spec``'s replicas whose registered value (``replicas``: each
    one's name and its ``Replica.settings``) is not what this run's ``spec`` gives a
    replica of that name (`applied`), in `applied`'s order. A replica that registered
    none (an older worker) is not compared, nor a key it does not register; nor, when
    ``cpus`` gives a list per replica, the CPUs of a replica ``replication`` does not
    name (one a count's turn gave) that are one of those lists. ``priority`` is compared
    only where this run's defines give one, at the replicas in ``rings`` (those its
    calls reach by an shm ring: a binding's own transport, or a replica that offers no
    shm, decides it; None: every one, where the module's transport is shm), and not
    where this run's ``coalesce`` is asked of those rings (no burst runs as it comes)."""
    found: dict[str, dict[str, tuple[str, str]]] = {}
    names = {r.name for r in spec.replication}
    prioritised = any(d.priority for d in spec.define.values())
    # (``cpus`` of a list per replica, for a replica this run does not name, one its turn
    # gave: this run's own replicas are each on one of the lists, which it agrees with)
    lists = {cpu_list(c) for c in spec.cpus} if len(spec.cpus) > 1 else set()
    for name, theirs in replicas:
        if not theirs:
            continue
        for key, ours in applied(spec, name).items():
            if key not in theirs or theirs[key] == ours:
                continue
            if key == "cpus" and name not in names and theirs[key] in lists:
                continue
            if key == "priority" and not (prioritised and not spec.coalesce and (
                    spec.transport == "shm" if rings is None else name in rings)):
                continue  # (no priorities to order by, no ring to run them from, or
                #           one whose bells this run holds back: worker/direct.py)
            found.setdefault(key, {})[name] = (theirs[key], ours)
    return [Differs(k, v) for k, v in found.items()]
