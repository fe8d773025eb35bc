"""A worker process: load the module, serve it, stay registered until told to stop."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from polybus.client.stubs import serving
from polybus.config.model import ModuleSpec, ReplicaSpec
from polybus.config.workerside import registered as settings_of
from polybus.errors import PolybusError, UsageError
from polybus.http.response import HTTP_SUFFIX, http_form
from polybus.memory import REPLICA_ARENAS, keep_freed_memory
from polybus.pinning import ENV, pin, unpin_inherited
from polybus.registry.client import Membership, RegistryClient
from polybus.stopsignals import Stopping, StopSignals
from polybus.transport.endpoints import WILDCARDS, Address
from polybus.transport.reach import (
    loopback_only,
    plain_beyond,
    registers,
    wildcard_on_loopback,
)
from polybus.usercode import source_digest
from polybus.usernames import import_name
from polybus.wire.messages import Replica
from polybus.worker.lifetime import die_with_parent
from polybus.worker.limits import own_limits, process_count
from polybus.worker.module import interfaces, load_module
from polybus.worker.options import ServeOptions
from polybus.worker.procpool import ProcessPool
from polybus.worker.runtime import WorkerRuntime
from polybus.worker.startstop import StartStopped, StartStops


@dataclasses.dataclass(frozen=True)
class Stopped:
    """How `serve` ended: the signal that stopped it (None: stopped without one, by
    ``on_serving``'s function), and how many calls it held went unanswered (still
    running after the runtime's grace, or queued: `WorkerRuntime.stop`)."""

    signum: int | None
    unanswered: int


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def line_buffered() -> None:
    """stdout and stderr written a whole line at a time, as on a terminal, whatever
    they are (a log file, for a worker the local engine started): a print is one write,
    seen at once by whoever reads the file (engines/logfollow.py)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(line_buffering=True, write_through=False)
            except (OSError, ValueError):
                pass


def options_for(spec: ModuleSpec | None, replica: ReplicaSpec | None, max_frame: int,
                http: Collection[str] = ()) -> ServeOptions:
    """A replica's servicing style: the largest pool and queue its interfaces ask for,
    and the own pool of each that asks for fewer (shared with its ``@http`` form, for
    the interfaces in ``http``: worker/limits.py)."""
    opts = ServeOptions(max_frame=max_frame)
    if spec is not None:
        defines = list(spec.define.values())
        if defines:
            opts.pool = max(d.pool for d in defines)
            opts.queue = max(d.queue for d in defines)
            opts.overflow = "reject" if any(d.overflow == "reject" for d in defines) else "block"
            named = [(n, d) for n, d in spec.define.items() if not d.filled]
            opts.queue_from = tuple(n for n, d in named if d.queue == opts.queue)
            opts.reject_from = tuple(n for n, d in named if d.overflow == "reject")
            opts.cache_bytes = spec.cache_bytes  # (one cache: the interfaces that cache)
            opts.limits = own_limits(spec, opts.pool, http)
        opts.allow_pickle = spec.pickle
        opts.in_order = not any(d.priority for d in spec.define.values())
        # With ``coalesce`` over shm (client and replicas sharing CPUs, worker/bells.py)
        # a replica whose queue ran dry sleeps at once: spinning, it would hold the CPU
        # the client then needs for the answers it was woken to read.
        opts.spin_s = 0.0 if spec.coalesce and spec.transport == "shm" else spec.spin
    else:  # (a hand-started worker with no configuration: its clients' may order calls)
        opts.in_order = False
    if replica is not None:
        opts.speed = replica.speed
    return opts


def place(spec: ModuleSpec | None, name: str) -> None:
    """This replica on the CPUs its module's ``cpus`` gives it (pinning.py); without
    them, not on a pinned client's CPUs that it inherited."""
    cpus = spec.cpus_of(name) if spec is not None else None
    if cpus is None:
        unpin_inherited()
        return
    assert spec is not None
    pin(cpus, f"modules.{spec.key}.cpus")
    os.environ.pop(ENV, None)  # (not passed on to what this replica starts)


LISTEN_HINT = "; or give --listen a host the certificate names"  # (a worker by hand)


def listen_host_hint(listen_host: str) -> str:
    """The end of the certificate's hint for a replica whose TCP host is the
    configuration's ``[cluster] listen_host`` (an engine's replica: a local worker, an
    MPI rank, a Ray actor; a worker by hand with --config and no --listen)."""
    if listen_host in WILDCARDS:  # (registered as its host's name or address)
        return (f'; with listen_host = "{listen_host}" each replica registers its own '
                "host, which the certificate on that host must name; or set [cluster] "
                "listen_host to a host the certificate names")
    return "; or set [cluster] listen_host to a host the certificate names"


def check_certificate(addresses: Sequence[Address], hint: str = LISTEN_HINT) -> None:
    """With ``[cluster] tls``: this process's certificate names the host of each TCP
    address the worker registers, where its peers dial it; else ConfigError at start,
    naming ``cluster.tls.cert`` and the address (not a refused handshake at each peer's
    first call), ``hint`` ending its hint: what sets that host where this replica was
    started (`LISTEN_HINT`, `listen_host_hint`). A wildcard address (0.0.0.0, ::)
    names no host to check."""
    from polybus.transport import tls

    config = tls.current()
    if config is None:
        return
    for a in addresses:
        if a.scheme == "tcp" and a.host not in WILDCARDS:
            config.verify(a.host, f"the address this worker registers ({a})", hint)


def _tls_on() -> bool:
    """This process speaks mutual TLS on TCP ([cluster] tls: `check_certificate`)."""
    from polybus.transport import tls

    return tls.current() is not None


def _say_reach(name: str, bound: Sequence[Address], registry: str, configured: bool,
               registered: Sequence[Address] | None = None) -> None:
    """What a worker started by hand says of who can reach it (transport/reach.py): a
    loopback listener registered with a registry beyond this host, a wildcard listener
    registered at loopback, and plain TCP beyond it (a worker of --module has no
    [cluster] tls to set: the hint says how). ``registered``: ``bound`` as registered
    (by default as `registers` gives it)."""
    if registered is None:
        registered = registers(bound, registry)
    warnings = [loopback_only(name, bound, registry, configured),
                wildcard_on_loopback(name, bound, registered, registry, configured)]
    how = "" if configured else (" (a worker takes it with --config app.toml --as KEY, "
                                 "not --module)")
    warnings += [(w + how) if w else None for w in
                 (plain_beyond(f"polybus worker {name}", a) for a in bound)]
    for line in warnings:
        if line:
            _say(line)


def _ended_cleanly(signum: int, frame: object) -> None:
    """An engine's worker stopped before it serves: nothing of it to end yet but the
    process (its process pool's children end with it, the kernel's SIGKILL)."""
    os._exit(0)


def serve(*, registry: str, module_path: Path, name: str, module_key: str, token: bytes,
          listen: str | Sequence[str] = "tcp://127.0.0.1:0", spec: ModuleSpec | None = None,
          replica: ReplicaSpec | None = None, heartbeat: float = 1.0,
          max_frame: int = 1 << 30, exit_with_parent: bool = False,
          parent: int | None = None, http: Sequence[str] = (), advertise: str | None = None,
          on_serving: Callable[[Callable[[], None]], None] | None = None,
          signals: Sequence[signal.Signals] | None = None, banner: bool = True,
          listen_from: str | None = None, cert_hint: str = LISTEN_HINT,
          by_hand: bool = False) -> Stopped:
    """Serve until SIGTERM/SIGINT; how it was stopped (`Stopped`). ``http``: interfaces
    that [serve] routes call; each is also served as ``<name>@http``, answering in
    response form (http/response.py).
    ``exit_with_parent``: SIGTERM when the parent ends, or now if it is not ``parent``.
    ``advertise``: the host registered for a TCP address bound to a wildcard (0.0.0.0,
    ::), which no peer can dial; without it, a worker started by hand registers the
    address this host reaches ``registry`` from (transport/reach.py). ``on_serving``:
    called once registered, with a function that stops the serving from any thread (the
    mpi engine's ranks are stopped so).
    ``signals``: those that stop it (default SIGTERM, and SIGINT and SIGHUP unless
    ``exit_with_parent``); () for none, as outside a main thread (a Ray actor's).
    ``banner``: say where it serves on stderr (not for a run's own replicas), and with
    ``listen_from`` where its main address's host came from (``[cluster] listen_host``).
    ``cert_hint``: what sets its host, said if its certificate does not name it
    (`check_certificate`). ``by_hand``: a worker started by hand, which a stop signal
    while it starts (its module importing, its pool starting) ends as one later does,
    returned as `Stopped`, wherever the signal landed (worker/startstop.py)."""
    if exit_with_parent:
        # Started by a run's engine, which stops it (SIGTERM, or by dying). A terminal's
        # Ctrl-C goes to the whole process group: the run must get it with its replicas
        # still there (it stops them), not lose them first and report them gone.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with_parent(parent=parent)  # (its run already gone: "terminated", 143)
        # Until its stop signals' own handlers (below), its engine's SIGTERM ends it at
        # once, the clean end it is later (0, nothing said). Raised as Terminated while
        # its module imported (serve stopping a worker it had just started again), it
        # said "polybus worker: terminated" and exited 143, a failure to serve's
        # supervisor; or, met in a callback of the import machinery, it was printed as
        # "Exception ignored in ..." and lost, the worker importing on.
        signal.signal(signal.SIGTERM, _ended_cleanly)
    if signals is None:
        # (by hand, SIGHUP too: its terminal closed; it stops as for Ctrl-C, files gone)
        signals = ((signal.SIGTERM,) if exit_with_parent
                   else (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    starting = StartStops(signals, untraced=sys._getframe()) if by_hand else None
    procs: ProcessPool | None = None
    runtime: WorkerRuntime | None = None
    try:
        line_buffered()  # (before the module's top-level code prints anything)
        place(spec, name)  # (before any thread of its own, or its process pool, starts)
        keep_freed_memory(REPLICA_ARENAS)  # large messages reuse their memory (memory.py)
        if starting is not None:
            starting.repeat()  # (its thread: on the replica's CPUs and arenas, as any)
        client = RegistryClient(registry, token)  # (a malformed address fails here, first)
        serving(module_key)  # (a use() it calls says a replica cannot: client/stubs.py)
        module = load_module(module_path, import_name(module_key))
        functions = interfaces(module, spec.define.keys() if spec else ())
        if not functions and spec is None:  # (--module: it registered, serving nothing)
            raise UsageError(f"module {module_key!r} ({module_path}) has no function to "
                             "serve: a worker serves each top-level def of its module "
                             "whose name does not start with '_' (not a class or its "
                             "methods, nor a function imported from another module: a def "
                             "that calls it is served)")
        options = options_for(spec, replica, max_frame, [n for n in http if n in functions])
        options.heartbeat = heartbeat
        if spec is not None and (children := process_count(spec)):
            procs = ProcessPool(children, module_path, import_name(module_key), name)
            functions = {n: (procs.wrap(n, spec.define[n].idempotent)
                             if spec.define[n].pool_kind == "processes" else f)
                         for n, f in functions.items()}
        for n in http:
            if n in functions:
                functions[n + HTTP_SUFFIX] = http_form(functions[n])
        runtime = WorkerRuntime(name, functions, token, listen, options)
        if advertise or exit_with_parent:
            addresses = [dataclasses.replace(a, host=advertise)
                         if advertise and a.scheme == "tcp" and a.host in WILDCARDS else a
                         for a in runtime.addresses]
        else:  # (by hand: a wildcard registers where this host reaches its registry from)
            addresses = registers(runtime.addresses, registry)
        check_certificate(addresses, cert_hint)
    except BaseException as exc:  # (a stop signal's too, as they start: what started
        # is ended, the process pool's threads waited for, not left running into the exit)
        if starting is not None:
            starting.close()  # (a signal now is noted only: the clean-up is not cut short)
        if runtime is not None:
            runtime.stop()
        if procs is not None:
            procs.close()
        if starting is None:
            raise
        if not isinstance(exc, StartStopped):
            starting.put_back()  # (its error said as ever: a signal now does as before)
            raise
        return Stopped(starting.signum, 0)  # (by hand: said as any stop is)
    if starting is not None:
        starting.close()  # (a signal from now on is noted, and passed on below)
    runtime.start()
    me = Replica(name, module_key, str(addresses[0]), sorted(functions),
                 runtime.options.speed, os.getpid(), [str(a) for a in addresses],
                 source_digest(module_path),
                 settings_of(spec, name, (n for n in functions if HTTP_SUFFIX not in n)))
    membership = Membership(client, me, heartbeat, say=_say)
    stop = StopSignals(signals)
    if starting is not None and starting.signum is not None:  # (came as it started: it
        stop.came(starting.signum)  # stops at once, unregistered, as any stop)
    runtime.on_died = stop.request  # (a thread of it ended: the worker stops, loudly)
    if runtime.died is not None:  # (before it was told whom to tell)
        stop.request()
    unanswered = 0
    try:
        # A stop signal ends the first registration where it is, a stop as at any other
        # time (a registry that accepted the connection and never answers held it for
        # the handshake's timeout, then the worker ended with its error, status 2)
        registered = False
        try:
            with stop.raising():
                membership.start()
            registered = True
        except Stopping:  # (its signal noted: the wait below ends at once)
            pass
        if banner and registered:
            more = f" (and {', '.join(map(str, addresses[1:]))})" if addresses[1:] else ""
            bound = runtime.addresses[0]
            how = [f"bound to {bound.host}"] if bound.scheme == "tcp" \
                and bound.host in WILDCARDS else []
            how += [listen_from] if listen_from else []
            if bound.scheme == "tcp" and _tls_on():
                how.append("mutual TLS")  # (said, as nothing else at start would say it)
            said = f" ({', '.join(how)})" if how else ""
            print(f"polybus worker {name}: serving {', '.join(sorted(functions))} "
                  f"at {addresses[0]}{said}{more}", file=sys.stderr, flush=True)
            if not exit_with_parent:  # (by hand; an engine's run says its own)
                _say_reach(name, runtime.addresses, registry, spec is not None,
                           addresses)
        if on_serving is not None and registered:
            on_serving(stop.request)
        stop.wait()
    finally:
        stop.close()
        membership.stop()
        client.close()
        unanswered = runtime.stop()
        if procs is not None:
            procs.close()
    if runtime.died is not None and stop.signum is None:
        # Not a worker alive, registered and deaf: gone, its registry and clients told.
        raise PolybusError(f"worker {name} stopped: {runtime.died} (a fault in polybus; "
                           "its log above says where)")
    return Stopped(stop.signum, unanswered)
