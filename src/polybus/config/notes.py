"""Likely mistakes the files cannot prove: noted (``check`` and ``run`` say them as
warnings) and the program runs. Each says which key does nothing, or nothing useful,
and why."""

from __future__ import annotations

import os
from typing import Any

from polybus.config.cpus import can_pin
from polybus.config.milfile import MilFile
from polybus.config.model import Binding, DefineSpec, ModuleSpec, ServeSpec, UseSpec
from polybus.config.problems import Problems, dotted, nearest
from polybus.config.source import SourceInfo
from polybus.plural import plural

__all__ = ["note_big_batches", "note_demand_batches", "note_idle", "note_idle_shares",
           "note_many_replicas", "note_no_ops", "note_plain_off_host", "note_unused"]


# ``aggregate`` as a size below this is a few calls' arguments at most (a call counts 8
# bytes and 8 per number, client/policies/aggregate.py): more likely a count in quotes
TINY_BATCH = 256


def _another(p: Problems) -> str:
    return "another module block" if p.mil else "another [modules.<key>]"


def note_big_batches(modules: dict[str, ModuleSpec], max_frame: int, p: Problems) -> None:
    """A batch is one frame: ``aggregate`` as a size past ``cluster.max_frame`` is cut
    there (a new user's "1TiB" was taken silently); and a size under `TINY_BATCH` bytes
    (a new user's ``aggregate = "16"``, meant as 16 calls) batches next to nothing."""
    for key, m in modules.items():
        for name, u in m.use.items():
            if u.aggregate_bytes is not None and u.aggregate_bytes < TINY_BATCH:
                n = u.aggregate_bytes
                p.note(f"aggregate is a size, {plural(n, 'byte')} of arguments a batch: about "
                       "what one call carries (8 bytes, and 8 for each number it passes), "
                       "so its calls hardly travel together (a string is a size in bytes, "
                       "a number a count of calls)",
                       dotted("modules", key, "use", name, "aggregate"),
                       f"for {plural(n, 'call')} a batch write the count, aggregate = {n} "
                       "(no quotes); a size such as '64KiB' batches small calls by the hundred")
            if u.aggregate_bytes is not None and u.aggregate_bytes > max_frame:
                p.note(f"aggregate = {u.aggregate_bytes:,} bytes is more than a batch can "
                       f"hold: a batch is one frame, cut at cluster.max_frame "
                       f"({max_frame:,} bytes)",
                       dotted("modules", key, "use", name, "aggregate"),
                       "write a size of at most max_frame, such as '64KiB'")


def note_demand_batches(modules: dict[str, ModuleSpec], bindings: list[Binding],
                        p: Problems) -> None:
    """``aggregate`` under ``async-demand(1)`` on a binding whose calls each need a
    record of their own (a ``priority`` on the interface, or calls that may migrate:
    migration paths on the module, ``balance = "steal"`` over two replicas or more): there
    the window counts calls, not batches (client/batching.py, `batcher_for`), so a batch
    holds at most one call and nothing travels together. A DNA trial of priority, demand and aggregation together
    ran 40 calls in 0 batches, said nowhere."""
    for b in bindings:
        user, server = modules.get(b.user), modules.get(b.module)
        use = user.use.get(b.name) if user is not None else None
        if use is None or server is None or use.callstyle.kind != "async-demand":
            continue
        if use.callstyle.window != 1 or (use.aggregate is None and use.aggregate_bytes is None):
            continue
        define = server.define.get(b.interface)
        why = (f"interface {b.interface!r} has a priority"
               if define is not None and define.priority is not None
               # (steal among one replica makes no migrator: client/migrate.py)
               else 'it has balance = "steal"' if use.balance == "steal"
               and len(server.replication) > 1
               else f"module {b.module!r} has migration paths" if server.migration else None)
        if why is None:
            continue
        p.note(f"aggregate batches nothing here: {why}, so each call is placed on its own "
               f'and async-demand(1) lets one call a replica at a time; a batch holds at '
               "most N calls of async-demand(N)",
               dotted("modules", b.user, "use", b.name, "aggregate"),
               "a wider window batches: async-demand(16) sends batches of up to 16 calls; "
               'or callstyle = "async". Without a priority or migration, async-demand(N) '
               "counts batches, not calls")


def note_plain_off_host(listen_host: str, tls: object | None, p: Problems) -> None:
    """A ``listen_host`` other hosts can reach, with no ``[cluster] tls``: the token
    handshake still keeps strangers out, but calls and values cross the network in
    plain text (DESIGN: TLS for anything that leaves the host). Noted, not refused: a
    private network, or an mpi or ray run's own, may be meant."""
    if tls is not None:
        return
    host = listen_host.strip("[]")
    if host in ("localhost", "::1") or host.startswith("127."):
        return
    tls = "tls" if p.mil else "[cluster] tls"
    p.note(f"listen_host = {listen_host!r} takes connections from other hosts, and without "
           f"{tls} what they carry (calls, arguments, answers) crosses the network "
           "unencrypted; the token handshake only keeps strangers out",
           "cluster.listen_host",
           f"set {MilFile.ADD_TLS if p.mil else '[cluster] tls = { cert, key, ca }'} "
           "(docs/security.md), or keep it on a network you trust")


def note_many_replicas(modules: dict[str, ModuleSpec], engine: str, p: Problems,
                       cpus: int | None = None) -> None:
    """The local engine starts every replica as a process of this machine: past 16 per
    CPU (and past 64), a count is more likely a typo than a plan (5000 on 2 CPUs was
    said "ok"). Only noted: replicas that mostly wait (I/O, a modelled cost) may be many."""
    if engine != "local":
        return
    cpus = cpus or os.cpu_count() or 1
    most = max(64, 16 * cpus)
    total = sum(len(m.replication) for m in modules.values())
    if total <= most:
        return
    key = max(modules, key=lambda k: len(modules[k].replication))
    p.note(f"{total} replicas on a machine with {cpus} CPU(s): the local engine starts each "
           f"as a process here, {len(modules[key].replication)} of them for module {key!r}",
           dotted("modules", key, "replication"),
           f"more than {most} ({cpus} CPU(s) x 16, at least 64) is rarely meant; ignore this "
           "if its replicas mostly wait")


def note_unused(modules: dict[str, ModuleSpec], infos: dict[str, SourceInfo],
                bindings: list[Binding], p: Problems) -> None:
    """A binding its module neither configures (``use.<name>``) nor names in a literal
    ``use("<name>")`` is most likely misspelt. Only noted: the name may come from
    another file the module imports, or be built at run time (then nothing is said)."""
    for b in bindings:
        m = modules.get(b.user)
        info = infos.get(b.user)
        if m is None or info is None or info.dynamic_use:
            continue
        used = sorted({*m.use, *(u.name for u in info.uses)})
        if b.name in used:
            continue
        close = nearest(b.name, used)
        key = p.mil.use_statement(b.name) if p.mil else f"use.{b.name} key"
        p.note(f"module {b.user!r} ({m.source.name}) never calls use({b.name!r}) and has no "
               f"{key}: nothing uses this binding", dotted("bind", f"{b.user}.{b.name}"),
               close or "ignore this if another file it imports calls use() with that name")


def note_no_ops(modules: dict[str, ModuleSpec], raw: dict[str, Any], p: Problems,
                bindings: list[Binding], serve: ServeSpec | None) -> None:
    """Options that do nothing where they are written: said, and the run goes on."""
    for key, m in modules.items():
        _note_coalesce(key, m, modules, bindings, serve, p)
        if m.cpus and not can_pin():
            p.note("cpus does nothing on this system: it cannot pin a process to CPUs "
                   "(Linux's sched_setaffinity)", dotted("modules", key, "cpus"),
                   "leave cpus out here; it applies where the processes run on Linux")
        for iface, d in m.define.items():
            if d.prefetch is not None and d.cache is None:
                p.note("prefetch pushes cached operands, and this interface caches none",
                       dotted("modules", key, "define", iface, "prefetch"),
                       'add cache = ["<parameter>", ...] or cache = "auto"')
        _note_shared_queue(key, m, raw, p)
        _note_shared_overflow(key, m, p)
        uses = raw.get(key, {}).get("use") if isinstance(raw.get(key), dict) else None
        for name, u in m.use.items():
            table = uses.get(name) if isinstance(uses, dict) else None
            if (isinstance(table, dict) and "linger" in table and u.aggregate is None
                    and u.aggregate_bytes is None):
                p.note("linger is how long a batch may wait to fill, and this binding "
                       "does not aggregate", dotted("modules", key, "use", name, "linger"),
                       'add aggregate = 64 (calls per batch) or a size such as "64KiB"')
            if ((u.aggregate is not None or u.aggregate_bytes is not None)
                    and u.callstyle.kind == "sync"):
                p.note("aggregate batches async calls, and this binding's calls are sync "
                       "(each waits for its answer, so none travel together)",
                       dotted("modules", key, "use", name, "aggregate"),
                       'set callstyle = "async" or "async-demand(N)"')


def _note_coalesce(key: str, m: ModuleSpec, modules: dict[str, ModuleSpec],
                   bindings: list[Binding], serve: ServeSpec | None, p: Problems) -> None:
    """``coalesce`` holds back the bells of answers written into a shared-memory ring
    (worker/bells.py, client/session.py: ``tune``), and turns the replicas' spin off only
    on a module of transport shm (worker/main.py): over tcp or ipc there is no bell to
    hold. It does something if a binding (or route) to the module asks for shm
    (``use.<iface>.transport``), whatever the module's own transport."""
    if not m.coalesce or m.transport == "shm":
        return
    asked = [u.transport for u in (
        *(modules[b.user].use.get(b.name) for b in bindings
          if b.module == key and b.user in modules),
        *(r.use for r in (serve.routes if serve is not None else ()) if r.module == key))
        if u is not None]
    if "shm" in asked:
        return
    p.note(f"coalesce does nothing here: it holds back the bell that wakes a client for an "
           f"answer over shm, and module {key!r} has transport = \"{m.transport}\" (no "
           "binding to it asks for shm)", dotted("modules", key, "coalesce"),
           'set transport = "shm" on the module or on a binding to it, or leave coalesce out')


def _note_shared_queue(key: str, m: ModuleSpec, raw: dict[str, Any], p: Problems) -> None:
    """A replica has one queue, the largest any define of its module asks for
    (worker/main.py): a smaller ``queue`` written on one define bounds nothing."""
    table = raw.get(key)
    defines = table.get("define") if isinstance(table, dict) else None
    named = {i: d for i, d in m.define.items() if not d.filled}  # (not those filled in)
    if not named or not isinstance(defines, dict):
        return
    largest = max(d.queue for d in named.values())
    of = _some([f"define.{i}" for i, d in named.items() if d.queue == largest])
    default = ", the default," if largest == DefineSpec().queue else ""
    for iface, d in m.define.items():
        written = defines.get(iface)
        if not (isinstance(written, dict) and "queue" in written and d.queue < largest):
            continue
        then = (f'overflow = "reject" refuses a call only when {largest} wait'
                if d.overflow == "reject" else f"the senders are held back only when {largest} wait")
        p.note(f"queue = {d.queue} has no effect: a replica of module {key!r} has one queue "
               "for all its interfaces, bounded by the largest queue any of its defines asks "
               f"for ({largest}{default} of {of}), so {then}",
               dotted("modules", key, "define", iface, "queue"),
               f"give every define of module {key!r} queue = {d.queue}, or put {iface} in a "
               f"module of its own: {_another(p)} with the same source")


def _note_shared_overflow(key: str, m: ModuleSpec, p: Problems) -> None:
    """A replica's one queue rejects if any define of its module says ``overflow =
    "reject"`` (worker/main.py): the calls of its other interfaces are refused too, those
    whose define asks for "block" and those no define names (filled in: `define_all`).
    Said of each define that wrote "reject", never of one filled in."""
    blocking = sorted(i for i, d in m.define.items() if d.overflow == "block" and not d.filled)
    unnamed = [i for i, d in m.define.items() if d.filled]
    if not blocking and not unnamed:
        return
    if blocking:
        whom = (f"calls to {_some(blocking)} are refused too (BusyError), though they ask for "
                '"block"' + (f", and so are calls to the interfaces no define names "
                             f"({_some(unnamed)})" if unnamed else ""))
    else:
        whom = (f"calls to its interfaces that no define names ({_some(unnamed)}) are refused "
                "too (BusyError)")
    every = "define" if not unnamed else "interface"
    for iface, d in m.define.items():
        if d.overflow == "reject" and not d.filled:
            p.note(f'overflow = "reject" applies to the whole queue of each replica of module '
                   f"{key!r}, which all its interfaces share: when it is full, {whom}",
                   dotted("modules", key, "define", iface, "overflow"),
                   f'set overflow = "reject" on every {every} of module {key!r}, or put '
                   f"{iface} in a module of its own: {_another(p)} with the same source")


def _some(names: list[str]) -> str:
    """``a, b, c and 2 more``."""
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def note_idle_shares(modules: dict[str, ModuleSpec], bindings: list[Binding],
                     serve: ServeSpec | None, p: Problems) -> None:
    """A share of 0 in a load ratio sends its replica none of the binding's calls: right
    for the head of a migration line (CORD's Type 2) or with stealing, where calls reach
    it otherwise; anywhere else the replica idles for these calls. Under async-demand a
    load ratio is not applied at all (`_note_demand_ratio`)."""
    uses: list[tuple[str, str, UseSpec]] = [
        (b.module, dotted("modules", b.user, "use", b.name, "loadratio"),
         modules[b.user].use[b.name]) for b in bindings
        if b.user in modules and b.name in modules[b.user].use]
    uses += [(r.module, dotted("serve", "routes", r.key, "loadratio"), r.use)
             for r in serve.routes] if serve is not None else []
    for module, key, use in uses:
        m = modules.get(module)
        if m is None or use.loadratio is None or p.reported(key):
            continue
        if use.callstyle.kind == "async-demand":
            _note_demand_ratio(module, m, key, use, p)
            continue
        if use.balance == "steal":
            continue
        fed = {name for path in m.migration for name in (path.a, path.b)}
        idle = [r.name for r, share in zip(m.replication, use.loadratio, strict=False)
                if share == 0 and r.name not in fed]
        if idle:
            one = len(idle) == 1
            p.note(f"replica{'' if one else 's'} {', '.join(repr(n) for n in idle)} of module "
                   f"{module!r} {'has' if one else 'have'} share 0, and nothing moves calls "
                   f"to {'it' if one else 'them'} (no balance = \"steal\", no migration path "
                   f"through {'it' if one else 'them'}): {'it gets' if one else 'they get'} "
                   "none of these calls", key,
                   "give every replica a share > 0, or add balance = \"steal\"; a 0 is for "
                   "a replica that calls reach by stealing or migration")


def _note_demand_ratio(module: str, m: ModuleSpec, key: str, use: UseSpec,
                       p: Problems) -> None:
    """async-demand hands each call to whichever replica has room (client/dispatch.py,
    demand_pick): the binding's load ratio is never read, so its shares, 0 included,
    decide nothing."""
    assert use.loadratio is not None
    zero = [r.name for r, share in zip(m.replication, use.loadratio, strict=False)
            if share == 0]
    also = ""
    if zero:
        one = len(zero) == 1
        also = (f": replica{'' if one else 's'} {', '.join(repr(n) for n in zero)} of module "
                f"{module!r}, at share 0, {'gets' if one else 'get'} calls like the others")
    p.note(f'loadratio has no effect under callstyle = "{use.callstyle}": demand hands each '
           f"call to whichever replica has room, so the shares are not applied{also}", key,
           'for a static split, use callstyle = "async" with this loadratio; to give faster '
           'replicas more, balance = "steal", or async-demand without a loadratio')


def note_idle(modules: dict[str, ModuleSpec], bindings: list[Binding],
              serve: ServeSpec | None, p: Problems) -> None:
    """A module with replicas that no [bind] entry and no [serve] route names: its
    workers start and serve no call (a new user's unbound module, or the client's module
    given ``replication = 2``, was started so without a word)."""
    for key, m in modules.items():
        if not m.replication or any(b.module == key for b in bindings):
            continue
        if serve is not None and any(r.module == key for r in serve.routes):
            continue
        n = len(m.replication)
        hint = ("the client's module runs in the client: leave out its replication"
                if m.entrypoint is not None else
                f'bind a function of it ("client.f" = "{key}.f"), or leave the module out')
        p.note(f"module {key!r} has {plural(n, 'replica')} but nothing calls it: no [bind] "
               f"entry or [serve] route names it, so {'its worker serves' if n == 1 else 'its workers serve'} no call",
               dotted("modules", key, "replication"), hint)
