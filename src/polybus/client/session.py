"""A client's session: replicas resolved, connections made, one dispatcher per binding."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from polybus.client.awaiting import Awaiting
from polybus.client.batching import Batcher, batcher_for
from polybus.client.calls import ReplicaLink
from polybus.client.choosing import check_shares, dial_places, places, replication_text
from polybus.client.counts import Broadcasts
from polybus.client.dialing import (
    check_serves,
    connect_all,
    same_source,
    say_tcp_only,
    tune,
    unreached_line,
)
from polybus.client.dispatch import Dispatcher
from polybus.client.forward import forwarder_for
from polybus.client.fwdown import keep_answers
from polybus.client.handsettings import say_other_settings
from polybus.client.inclient import InClient, in_client, release
from polybus.client.lossline import HowEnded, LossLines
from polybus.client.lostnotes import mark_outside, outside
from polybus.client.migrate import Migrator, migrator_for
from polybus.client.order import order_calls
from polybus.client.params import parameters, priority_fn
from polybus.client.plan import comm_for
from polybus.client.pump import Gate, Pump
from polybus.client.reactor import Reactor
from polybus.client.rejoin import Rejoin
from polybus.client.revive import WAIT_S
from polybus.client.stats import SessionStats, ask_stats, busy_at_start, link_bytes, session_stats
from polybus.client.upstreamdue import watch_upstream
from polybus.client.waitfor import await_replicas, none_registered
from polybus.config.model import AppConfig, Binding, DefineSpec, UseSpec
from polybus.config.problems import dotted
from polybus.errors import ConnectionLostError, NoReplicaError, PolybusError, UsageError
from polybus.memory import keep_freed_memory
from polybus.registry.client import RegistryClient
from polybus.saidonce import KIND
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica, Stats

log = logging.getLogger("polybus.client")


class Session:
    """Everything a client module's ``use``d names need, for one run."""

    def __init__(self, app: AppConfig, registry: str, token: bytes,
                 bindings: Sequence[tuple[Binding, UseSpec]] | None = None,
                 pump: bool = True,
                 how_ended: HowEnded | None = None,
                 how_ended_later: HowEnded | None = None, turn: bool = False,
                 wait_s: float = 0.0, rejoin: bool = False) -> None:
        """``bindings``: the names to serve and how to call them; default: the client
        module's ``[bind]`` entries with its ``use`` options (the HTTP front door gives
        its routes instead). ``pump``: a thread moves held work while the program is
        outside polybus (client/pump.py); False where an event loop drives the reactor
        on every answer (the front door), which such a thread would read first.
        ``how_ended``, ``how_ended_later``: the cluster's (`Cluster.how_ended`...), which
        say how the worker of a lost replica ended, with its loss (client/lossline.py);
        None where no engine started them. ``turn``: the registry is shared with other
        clients (workers started by hand): take this client's turn of its rotation, so
        that each binding's first call goes to the replica after the previous client's
        (the name server's round robin); a run's own registry has no other client.
        ``wait_s``: each module is waited for that long at most (from here) until its
        replication's count is registered (client/waitfor.py, ``--wait-for-workers``).
        ``rejoin``: its workers were started apart (a shared registry): a lost replica
        is looked for again there, and a call with none live waits for it (rejoin.py)."""
        keep_freed_memory()  # large answers reuse their memory (memory.py)
        self.app = app
        self.token = token
        self.registry = RegistryClient(registry, token, heartbeat=app.cluster.heartbeat)
        self._wait = (wait_s, time.monotonic() + wait_s)  # (--wait-for-workers)
        self.reactor = Reactor(heartbeat=app.cluster.heartbeat)
        self.links: dict[str, list[ReplicaLink]] = {}
        self.dispatchers: dict[str, Dispatcher] = {}
        # What a use()d name calls: its dispatcher, or an aggregating binding's Batcher.
        self.entries: dict[str, Any] = {}
        # A use()d name bound to a module with replication = 0: a plain call here
        self.local: dict[str, InClient] = {}
        self.batchers: list[Batcher] = []
        self.broadcasts = Broadcasts()  # (`broadcast`'s, for the run's report: counts.py)
        self.labels: dict[str, str] = {}  # bound name -> its [bind] key ("client.make")
        self.reactor.on_lost = self._lost
        self.reactor.after_step = self._refill
        self.reactor.on_released = self._released
        self.migrators: list[Migrator] = []
        self.gate: Gate | None = None  # (with a pump: client/pump.py)
        self.pump: Pump | None = None
        self.awaiting: Awaiting | None = None  # calls held for promises' values (awaiting.py)
        self._base: dict[int, Stats | None] = {}
        self._bytes0: dict[int, tuple[int, int]] = {}  # each link's (sent, received) then
        self._short: set[str] = set()  # modules already warned about (once a session)
        # A lost replica said, with how its worker ended if its engine can tell; by name,
        # what was said of each whose end was known (a 502's text: http/revival.py)
        self.losses = LossLines(how_ended, how_ended_later)
        self.ended = self.losses.ended
        self._serves: dict[str, list[str]] = {}  # replica name -> its interfaces
        # module -> (replicas registered, those left out as running another file)
        self._found: dict[str, tuple[int, int]] = {}
        self._turn = turn
        self._turns: dict[str, int] = {}  # module -> the turn its resolve took
        self._starts: dict[str, int] = {}  # module -> where its rotations start
        self.rejoin = Rejoin(self, max(WAIT_S, wait_s)) if rejoin else None
        self.dials_again = rejoin or not pump  # (lost replicas dialled again: the front door's too)
        try:
            if bindings is None:
                bindings = [(b, app.modules[b.user].use.get(b.name, UseSpec()))
                            for b in app.bindings if b.user == app.client]
            bound: dict[str, tuple[list[str], list[ReplicaLink]]] = {}
            self._ratios = {b.module for b, use in bindings if use.loadratio}  # (by name)
            for b, use in bindings:
                self.labels[b.name] = f"{b.user}.{b.name}"
                if app.modules[b.module].in_client:  # (no replica: client/inclient.py)
                    self.local[b.name] = in_client(app, b, use, self.local)
                    continue
                links = self._links_for(b.module, use.transport)
                check_serves(b, links, self._serves, self.registry.address, app.path)
                module = app.modules[b.module]
                bound.setdefault(b.module, ([], links))[0].append(b.interface)
                check_shares(use.loadratio, [lk.name for lk in links], b.module, b.interface,
                             dotted("modules", b.user, "use", b.name, "loadratio")
                             if b.user in app.modules else
                             dotted("serve", "routes", b.name, "loadratio"), str(app.path))
                base = b.interface.partition("@")[0]  # ("page@http": page's options)
                define = module.define.get(base, DefineSpec())
                prio = (priority_fn(define.priority, module.source, base,
                                    dotted("modules", b.module, "define", base, "priority"))
                        if define.priority else None)
                self.dispatchers[b.name] = Dispatcher(
                    b.interface, self.reactor, links, use.callstyle, loadratio=use.loadratio,
                    priority=prio, timeout=use.timeout or define.timeout,
                    idempotent=define.idempotent, least=use.balance == "least",
                    start=self._starts.get(b.module, 0))
                # (no pump: a loop reads every answer as it comes, none at a call)
                self.dispatchers[b.name].reads_fresh = pump
                self.dispatchers[b.name].pickle = module.pickle
                self.dispatchers[b.name].comm = comm_for(
                    self, self.dispatchers[b.name], use, define,
                    parameters(module.source, base), module.cache_bytes)
                self.dispatchers[b.name].forwards_answers = bool(use.forward)
                self.dispatchers[b.name].rejoins = rejoin  # (its lost calls wait: rejoin.py)
                migrator = migrator_for(self.dispatchers[b.name], module, use, define)
                if migrator is not None:
                    self.migrators.append(migrator)
                    self.dispatchers[b.name].keep_args = True  # (its calls may move)
                    self.dispatchers[b.name].plain_async = False
                if use.forward and use.callstyle.kind != "sync":
                    # (a call migration moves takes its edges along: client/fwdmove.py)
                    self.dispatchers[b.name].forwarder = forwarder_for(self)
                    if use.forward == "keep":  # (its answers kept where made: fwdown.py)
                        keep_answers(self.dispatchers[b.name], forwarder_for(self))
                elif not use.forward and use.callstyle.kind != "sync":
                    # (a sync call waits anyway: its promises are waited for at the call,
                    # as with forwarding on, and it keeps its plain path)
                    self.dispatchers[b.name].awaiting = self._awaiting()
                batcher = batcher_for(self.dispatchers[b.name], self.reactor, use.aggregate,
                                      use.aggregate_bytes, use.linger,
                                      general=migrator is not None,
                                      max_frame=self.app.cluster.max_frame)
                if batcher is not None:
                    self.batchers.append(batcher)
                d = self.dispatchers[b.name]
                # A plain sync or async binding's stub goes straight to its hot path.
                self.entries[b.name] = batcher or (
                    d.call_sync if d.plain_sync else d.call_async if d.plain_async else d)
            for mod, (interfaces, found) in bound.items():  # (once a module: all its names)
                self._warn_if_short(mod, interfaces, found)
            self._keep_moving_args()
            watch_upstream(self)  # (a wait looks at the deadlines of what it waits on)
            if self.awaiting is not None:  # (and forwarding bindings, for promises whose
                for d in self.dispatchers.values():  # answers are not forwarded: awaiting.py)
                    if d.forwarder is not None:
                        d.awaiting = self.awaiting
            self.reactor.refills = bool(
                self.batchers or self.migrators or self.awaiting is not None
                or any(d.style.kind == "async-demand" for d in self.dispatchers.values()))
            if self.reactor.refills and pump:  # work may wait at the client: the pump moves it
                self.gate = Gate()
                self.reactor.open_gate(self.gate)
                self.pump = Pump(self.reactor, self.gate, self._waiting)
            order_calls(self.reactor, self.dispatchers, self.entries, self.batchers)  # order.py
            # A replica's counters run for its whole life (it may have served other runs,
            # as workers started by hand do): this run's figures are the difference.
            self._base = {id(lk): ask_stats(self.reactor, lk)
                          for links in self.links.values() for lk in links}
            if self._turn and (busy := busy_at_start(self)) is not None:
                log.warning(busy)  # (workers started by hand: calls before this run's)
            # ... and its bytes are what its calls carried, not that request's.
            self._bytes0 = {id(lk): link_bytes(lk) for links in self.links.values()
                            for lk in links}
        except BaseException:
            self.close()
            raise

    def _awaiting(self) -> Awaiting:
        """The session's Awaiting (made on first use); its pump is looked up when asked."""
        if self.awaiting is None:
            self.awaiting = Awaiting(self.reactor, lambda: self.pump is not None
                                     and self.pump.on_thread())
        return self.awaiting

    def _keep_moving_args(self) -> None:
        """A replica that lets calls be stolen gives up queued calls of any interface on
        the connection, not only the migrating binding's: every binding sharing a link
        with a Migrator keeps its calls' arguments as they were (client/snapshot.py)."""
        moving = {id(lk) for m in self.migrators for lk in m.d.links}
        for name, d in self.dispatchers.items():
            if not d.keep_args and any(id(lk) in moving for lk in d.links):
                d.keep_args = True
                d.plain_async = False
                if self.entries.get(name) == d.call_async:
                    self.entries[name] = d

    def _warn_if_short(self, module: str, interfaces: list[str],
                       links: list[ReplicaLink]) -> None:
        """Workers started by hand may be fewer than the replication asks for, or (the
        hosts engine, given names) others than it names: the run goes on with those found
        (none is an error, in _links_for), but says so once a module, naming the
        interfaces it serves here, with what was registered and what is used."""
        configured = self.app.modules[module].replication
        found = {lk.name for lk in links}
        # Names the configuration gave hosts (replication = "alpha,beta" under hosts):
        # one that is not there while others serve in its place is said by name (the run
        # used a worker named neither, with no word when the count matched).
        missing = [r.name for r in configured if r.host and r.name not in found]
        if (len(links) >= len(configured) and not missing) or module in self._short:
            return
        self._short.add(module)
        instead = sorted(found - {r.name for r in configured})
        named = (f"; {', '.join(missing)} named in its replication not registered"
                 + (f", {', '.join(instead)} serving instead" if instead else "")
                 if missing else "")
        registered, other_file = self._found.get(module, (len(links), 0))
        left = f", {other_file} of them left out (another file)" if other_file else ""
        names = ", ".join(repr(i) for i in dict.fromkeys(i.partition("@")[0]
                                                         for i in interfaces))
        log.warning("polybus: warning: module %r (%s): configured %d replica(s), found %d "
                    "registered at %s%s; running with %d%s", module, names, len(configured),
                    registered, self.registry.address, left, len(links), named)

    def _links_for(self, module: str, transport: str | None = None) -> list[ReplicaLink]:
        """Connections to the replicas of ``module`` its replication asks for, of those
        registered (client/choosing.py), over ``transport`` (default: the module's own);
        a binding that overrides it gets connections of its own."""
        spec = self.app.modules[module]
        scheme = transport or spec.transport
        key = module if scheme == spec.transport else f"{module}@{scheme}"
        if key in self.links:
            return self.links[key]
        replicas: list[Replica]
        if self._wait[0]:  # (past its end: one look)
            await_replicas(self.registry, module, len(spec.replication), self._wait[1],
                           self._wait[0], spec.source)
        if self._turn and module not in self._turns:
            replicas, self._turns[module] = self.registry.resolve_turn(module=module)
        else:
            replicas = self.registry.resolve(module=module)
        if not replicas:
            raise none_registered(self.registry, module, self.app, self._wait[0])
        usable = same_source(module, spec.source, self.registry.address, replicas,
                             self._short)
        self._found[module] = (len(replicas), len(replicas) - len(usable))
        self._serves.update((r.name, list(r.interfaces)) for r in usable)
        # The replication's places, each its named replica or another (client/choosing.py):
        # a load ratio's shares follow the replicas as the configuration lists them.
        configured = [r.name for r in spec.replication]
        chosen, spares, self._starts[module] = places(  # (ratios and paths follow names)
            module, configured, usable, self._turns.get(module),
            spec.named or module in self._ratios or bool(spec.migration))
        say_tcp_only(module, scheme, chosen, self._short, self.app)
        made, failed = dial_places(chosen, spares, lambda rs: connect_all(
            rs, scheme, self.token,
            [Codec(allow_pickle=spec.pickle, max_frame=self.app.cluster.max_frame)
             for _ in rs]))
        if self._turn:  # (workers by hand: each applies its own settings, said if not ours)
            say_other_settings(self.app, module, made, self._short)
        links = []
        for r, channel in made:
            tune(channel, spec)
            link = ReplicaLink(r.name, module, channel, r.speed, self.losses.dialling(r.name))
            self.reactor.add(link)
            links.append(link)
        # A replica still registered that cannot be reached (stopped, gone within the
        # registry's ttl, or registered with an address this host cannot dial) is left out
        # as one not registered is (a spare takes its place), and said by name; none
        # reached is an error that names each. (It failed the run, naming an address.)
        unreachable = [unreached_line(r, scheme, e, self.registry.address) for r, e in failed]
        if unreachable and not links:
            raise NoReplicaError(
                f"no replica of module {module!r} registered at {self.registry.address} "
                f"can be reached: {'; '.join(unreachable)}")
        if unreachable and module not in self._short:
            self._short.add(module)  # (said here: the count warning would say less)
            log.warning("polybus: warning: module %r: %d of %d replica(s) registered at "
                        "%s cannot be reached (%s); running with %d of the %d configured",
                        module, len(unreachable), len(usable), self.registry.address,
                        "; ".join(unreachable), len(links), len(configured))
        tried = {r.name for r, _ in made} | {r.name for r, _ in failed}
        unused = [r.name for r in usable if r.name not in tried]
        if unused and f"{module} unused" not in self._short:
            self._short.add(f"{module} unused")
            replication = replication_text(configured, spec.named)
            log.warning("polybus: warning: module %r: %d replicas registered%s, replication "
                        "= %s; using %s, not %s (%s replication to use them all)", module,
                        len(usable), " running this file" if len(usable) < len(replicas)
                        else "", replication, ", ".join(lk.name for lk in links),
                        ", ".join(unused), "name them in" if spec.named else "raise",
                        # (one warning, whichever replicas a run took in turn: saidonce.py)
                        extra={KIND: f"{module} unused: {len(usable)}/{len(replicas)} "
                                     f"registered, replication {replication}"})
        self.links[key] = links
        return links

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            d = self.entries[name] if name in self.entries else self.local[name]
        except KeyError:
            known = ", ".join(sorted([*self.dispatchers, *self.local])) or "none"
            raise UsageError(f"use({name!r}): no binding for {name!r} in [bind] "
                             f"(bound names: {known})") from None
        return d(args, kwargs)

    def _waiting(self) -> bool:
        """Something waits at the client for a replica (client/pump.py): calls held to
        be written, writes left unfinished, a demand backlog, batches queued for room,
        or calls a migrator watches."""
        links = self.reactor.links
        return (self.reactor.unfinished or any(lk.held for lk in links)
                or (self.awaiting is not None and self.awaiting.pending())
                or any(d._backlog for d in self.dispatchers.values())
                or any(bt.backlog or bt.owes for bt in self.batchers)
                or (bool(self.migrators) and any(lk.outstanding for lk in links)))

    def _refill(self) -> None:
        if self.rejoin is not None:  # (lost replicas found again: put in place first)
            self.rejoin.tick()
        if self.awaiting is not None:  # (first: a call placed may go to a backlog below)
            self.awaiting.release()
        for bt in self.batchers:
            if bt.backlog or bt.owes:
                bt.pump(wait=self.pump is None or not self.pump.on_thread())
        for d in self.dispatchers.values():
            if d._backlog:
                d.refill()
        for m in self.migrators:
            m.tick()

    def _released(self, link: ReplicaLink, ids: list[int], req: int) -> None:
        for m in self.migrators:
            if m.owns(req):
                m.released(link, ids, req)
                return

    def _lost(self, link: ReplicaLink, error: PolybusError) -> None:
        # (said once, however many links it had; now, or once the engine can say how
        # its worker ended, never waited for here, on the reactor's path: lossline.py)
        self.losses.lost(link.name, link.module, error, link.dialling)
        if isinstance(error, ConnectionLostError) and outside(self.ended.get(link.name)):
            # (an engine that says how its workers ended only later, mpi or Ray, has not
            # yet: the call is not cleared then)
            mark_outside(error, [self.ended.get(n) for n in {link.name} | {
                lk.name for d in self.dispatchers.values() for lk in d.links
                if lk.dead and lk.module == link.module}])
        for d in self.dispatchers.values():
            d.lost(link, error)
        for bt in self.batchers:
            bt.lost(link, error)
        if self.rejoin is not None:
            self.rejoin.lost(link, error)

    def stats(self) -> SessionStats:
        return session_stats(self)  # (client/stats.py)

    def close(self, wait: bool = True) -> None:
        """Everything the session holds let go; first, the loss lines still waiting for
        the engine's word said, once it comes, or without ``wait`` at once (an interrupted
        run: client/lossline.py; a Ctrl-C in that wait closes the rest all the same)."""
        try:
            if self.rejoin is not None:
                self.rejoin.close(wait)
            self.losses.close(wait)
        finally:
            if self.pump is not None:
                self.pump.stop()
            if self.awaiting is not None:
                self.awaiting.close()
            for bt in self.batchers:
                bt.close()
            self.reactor.close()
            self.registry.close()
            release(self.local)  # (the modules called in the client: client/inclient.py)
