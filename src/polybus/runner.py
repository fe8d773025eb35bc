"""`polybus.run`: start what the configuration needs, run the client, measure, clean up."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from polybus.callsite import PLACED, place
from polybus.client import unseen
from polybus.client.drain import arrived, drain, under_way
from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.client.stats import ReplicaStats
from polybus.client.stubs import activate, importing, one_run
from polybus.client.waitfor import wait_seconds
from polybus.config import load
from polybus.config.cluster import check_registry_option
from polybus.config.model import AppConfig
from polybus.config.origin import PYTHON, SET, Origin
from polybus.deadline import check_timeout, time_limit
from polybus.embedded import ClientImports, loop_note
from polybus.engines.base import Cluster, Engine
from polybus.errors import (
    AuthenticationError,
    ConfigError,
    ConfigWarning,
    ConnectionLostError,
    PoisonCallError,
    PolybusError,
    WorkerDiedError,
)
from polybus.pinning import check_here, pinned_run
from polybus.runargs import echo_to, jsonable, override_strings
from polybus.token import check_token_apart, cluster_token, token_source
from polybus.transport import tls
from polybus.usernames import import_name
from polybus.worker.module import entry_note, load_module


@dataclass
class RunResult:
    """The client's result and what the run cost. Times in seconds, sizes in bytes."""

    result: Any
    elapsed_s: float          # the entrypoint, and the calls it left under way taken
    #                           in (drain); start-up is apart
    startup_s: float
    calls: int
    bytes_sent: int           # at the client
    bytes_received: int
    replicas: list[ReplicaStats] = field(default_factory=list)
    # What each binding's strategies did, keyed as its [bind] entry ("client.make"):
    # calls, batches, operands put and named, values forwarded... (client/counts.py)
    interfaces: dict[str, dict[str, int]] = field(default_factory=dict)
    broadcasts: dict[str, int] = field(default_factory=dict)  # values, and their Puts
    # Modules with replication = 0 (no replica: called in the client) -> their calls
    in_client: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """The summary `polybus run` writes to stderr, as text: a table of the replicas,
        the totals, what each binding's strategies did (``print(r.summary())``)."""
        from polybus.summary import text

        return text(self)

    def to_json(self) -> dict[str, Any]:
        # (the result left out of asdict, which deep-copies what it holds: a result
        # that cannot be copied, a lock or a socket, raised TypeError after the run,
        # and a large array was copied whole only to be turned into lists)
        d = asdict(replace(self, result=None))
        d["result"] = jsonable(self.result)
        return d


def busy_share(busy_s: float, elapsed_s: float, handlers: int = 1) -> float:
    """The share of a replica's handlers' time spent in calls: ``busy_s`` (the calls'
    durations summed, so a pool's overlapping calls can add up past the elapsed time)
    over ``elapsed_s`` times its ``handlers``; 0 for no time. At most 1: the busy time
    and the elapsed time are not read at the same instants (a new user's shared
    replica, whose busy time counted a call begun before the run in full, showed 105
    busy %; a call under way now counts for its part within the run: worker/busy.py)."""
    if elapsed_s <= 0:
        return 0.0
    return min(1.0, busy_s / (elapsed_s * max(1, handlers)))


def run(path: str | Path, overrides: Mapping[str, Any] | Sequence[str] | str = (), *,
        registry: str | None = None, token_file: str | None = None,
        origin: Origin = PYTHON, worker_output: bool | TextIO | None = True,
        timeout: float | str | None = None,
        wait_for_workers: float | str | None = None) -> RunResult:
    """Run the program ``path`` configures and return its result and statistics.

    ``overrides`` are ``{"modules.server.replication": 8}`` or ``["key=value", ...]`` (a
    single ``"key=value"`` str is one override); a mistake in one is reported against
    ``overrides`` (``origin``: the CLI's are --set).
    With ``registry`` (HOST:PORT), use the workers registered there instead of
    starting any; the token then comes from ``token_file`` or $POLYBUS_TOKEN.

    What the workers it starts print (stdout and stderr) is forwarded, line by line and
    prefixed with the replica's name (``(server-0) ...``), to ``sys.stderr`` as it is
    when the run starts (``True``, the default), or to the text stream ``worker_output``
    names (an object whose ``write`` takes a str: not a binary stream such as
    ``io.BytesIO``); ``False`` or ``None``: not forwarded. Anything else (``0``, a file
    name) is a UsageError before the run starts. Workers of a ``registry`` print where
    they were started.

    With ``timeout`` (seconds, or a duration such as ``"500ms"`` or ``"2m"``), the program
    is stopped once it has run that long (from its entrypoint's start):
    `polybus.deadline.RunTimeout` is raised in the main thread as Ctrl-C would be, and
    the run's workers are stopped (deadline.py). So ``timeout`` works only when `run`
    is called from the main thread (the program is stopped there, as by Ctrl-C): from
    any other thread it is a UsageError before the run starts; leave it out there.

    ``wait_for_workers`` (a duration, with a ``registry``): each module called is waited
    for that long at most until its replication's count is registered (client/waitfor.py).
    """
    check_registry_option(registry)  # (as [cluster] registry is checked)
    timeout = check_timeout(timeout)
    echo = echo_to(worker_output)  # (a mistake in it said before anything starts)
    sets = override_strings(overrides)
    # (the workers get them as --set, checked here first; a hosts engine's missing
    # registry too, unless given here)
    app = load(path, sets, origin, running=not registry,
               tls_hosts="client" if registry else None)
    wait_s = wait_seconds(wait_for_workers, registry or app.cluster.registry)
    check_token_apart(token_file, registry or app.cluster.registry, python=not origin.shell)
    for note in app.notes:
        warnings.warn(str(note), ConfigWarning, stacklevel=2)
    client = app.modules.get(app.client)
    if client is None or client.entrypoint is None:
        raise ConfigError("no module has an entrypoint", file=str(path), key="modules",
                          hint="a configuration with only [serve] routes is started with "
                               "`polybus serve`")
    session: Session | None = None
    ended: BaseException | None = None  # what the program raised, if it did
    interrupted = False  # Ctrl-C, SIGTERM, the mpi launcher's stop, a time limit
    imports: ClientImports | None = None
    # (outer: in a run nested in a client's entrypoint, the outer run's session)
    check_here(app, registry=bool(registry))  # (the CPUs of the processes started here)
    with one_run() as outer, started_cluster(app, sets, registry=registry, origin=origin,
                                             token_file=token_file, worker_output=echo
                                             ) as cluster, \
            pinned_run(client.cpus_of(None), f"modules.{client.key}.cpus",
                       app.origin(f"modules.{client.key}.cpus")):
        kept = unseen.saved() if outer is not None else None  # (the outer run's: given back)
        try:
            t0 = time.perf_counter()
            # (the folder's modules, as they are now; before the session, which imports
            # the modules called in the client, replication = 0, and their helpers)
            imports = ClientImports(client.source, [
                m.source for m in app.modules.values() if m.in_client and m.entrypoint is None])
            session = Session(app, cluster.registry, cluster.token,
                              how_ended=cluster.how_ended,
                              how_ended_later=cluster.how_ended_later, turn=cluster.shared,
                              wait_s=wait_s, rejoin=cluster.shared)
            startup = cluster.startup_s + time.perf_counter() - t0
            importing(client.key, client.entrypoint)  # (a call made meanwhile: stubs.py)
            try:
                module = load_module(client.source, import_name(client.key))
            finally:
                importing(None)
            entry = getattr(module, client.entrypoint)
            if why := entry_note(entry):  # (async def, or a generator function)
                raise ConfigError(f"{client.entrypoint!r} {why}", file=str(client.source),
                                  key=f"modules.{client.key}.entrypoint")
            activate(session)
            unseen.reset()
            t0 = time.perf_counter()
            with time_limit(timeout):
                try:
                    value = entry(*client.args, **client.kwargs)
                except BaseException as exc:
                    ended = _ended(exc, app, client.key)  # (the user's line: callsite.py)
                    raise
                try:
                    result = wait(value)  # (a promise returned unforced is waited for here)
                except BaseException as exc:
                    ended = _ended(exc, app, client.key, returned_by=client.entrypoint)
                    raise
                drain(session)  # calls made and never waited for run to their end
                unseen.settle(session)  # and their errors no one saw are said
            elapsed = time.perf_counter() - t0
            stats = session.stats()
            for rep in stats.replicas:
                if rep.busy_s is not None:  # (None: a lost replica's, not known)
                    rep.busy_fraction = busy_share(rep.busy_s, elapsed, rep.handlers)
            return RunResult(result, elapsed, startup, stats.calls, stats.bytes_sent,
                             stats.bytes_received, stats.replicas, stats.interfaces,
                             stats.broadcasts, stats.in_client)
        except KeyboardInterrupt:  # (anywhere: the entrypoint, the drain, the settling)
            interrupted = True
            raise
        finally:
            activate(outer)  # (None but in a nested run: the outer run's calls go on)
            if imports is not None:
                imports.note()
            if session is not None:
                # (calls still running when the program ended: no outcome to count, so
                # said as such, or the count of failures would vary run to run unexplained)
                running = _running(session) if ended is not None else 0
                # (interrupted: nothing waited for, a loss line's report neither; under
                # mpi the launcher's SIGKILL follows within 0.25 s: engines/mpi.py)
                session.close(wait=not interrupted)
                if ended is not None:  # (closed: no call fails after this)
                    unseen.note_hushed(ended, session, running)
            if kept is not None:
                unseen.restore(kept)


def _running(session: Session) -> int:
    """Calls under way (drain.under_way), the answers already here taken in first (a
    failure that came is a failure, not a call under way: drain.arrived), or 0 if the
    session cannot say: the note is not worth hiding the program's own exception for."""
    try:
        arrived(session)
        return under_way(session)
    except Exception:
        return 0


def _ended(exc: BaseException, app: AppConfig, client: str,
           returned_by: str | None = None) -> BaseException:
    """The program raised ``exc`` (from its entrypoint or, ``returned_by``, the wait for
    the promise it returned): the run ends with it. A failed call (callsite.PLACED) names the
    user's line (callsite.py); the errors of the calls it had no chance to look at are
    then counted in one note, not said one by one (client/unseen.py)."""
    if isinstance(exc, PLACED):
        place(exc, app, client, returned_by)
    loop_note(exc)  # (a notebook's cell: an event loop runs there already)
    unseen.hush()
    return exc


@contextmanager
def started_cluster(app: AppConfig, overrides: tuple[str, ...] = (), *,
                    registry: str | None = None,
                    token_file: str | None = None,
                    worker_output: TextIO | None = None,
                    restart: TextIO | None = None,
                    origin: Origin = SET) -> Iterator[Cluster]:
    """The cluster ``app`` needs, up while the block runs: an embedded registry and the
    local engine's workers, or (``registry`` / [cluster] registry) the replicas already
    registered there. Everything started is stopped at the end, however it ends.
    ``worker_output``: where the local engine forwards its workers' lines, if anywhere.
    ``restart`` (`polybus serve`): the local engine's workers that end on their own are
    started again (engines/supervise.py), said on that stream. ``origin``: the caller's
    (`polybus.run`'s from Python: a missing token's error names ``token_file=``)."""
    given = registry  # (--registry; [cluster] registry's was refused at load)
    registry = registry or app.cluster.registry
    kind = app.cluster.engine
    if kind in ("mpi", "ray") and registry:
        # (said where the engine was chosen, in the file or an override, when the
        # registry is the run's own: the file has none)
        key = "cluster.engine" if given else "cluster.registry"
        raise ConfigError(f"the {kind} engine starts its own registry; it uses no other",
                          file=app.origin(key), key=key,
                          hint=("run without a registry (--registry; registry= from "
                                "Python), or use the hosts engine") if given else
                          "remove [cluster] registry, or use the hosts engine")
    if kind == "local" and not registry:
        _warn_if_launched(app)
    if kind == "hosts" and not registry:  # (run and serve find it in load first)
        # (said where the engine was chosen, as load says it: the file or an override)
        raise ConfigError("the hosts engine uses workers already running; it needs their "
                          "registry", file=app.origin("cluster.engine"),
                          key="cluster.engine",
                          hint='set registry = "HOST:PORT" in [cluster], or pass '
                               "registry= (--registry to run or serve)")
    engine: Engine | None = None
    # Every connection of this run (embedded registry, client) follows [cluster] tls;
    # the workers the engine starts read the same configuration and do the same.
    previous_tls = tls.current()
    tls.configure_cluster(app.cluster)
    try:
        if registry:
            python = not origin.shell  # (an error names token_file=, not --token-file)
            token = cluster_token(token_file, app.cluster.token_file, python=python)
            assert token is not None
            try:
                yield Cluster(str(registry), token, shared=True)
            except AuthenticationError as exc:
                exc.add_note(f"this run's token came from "
                             f"{token_source(token_file, app.cluster.token_file, python=python)}")
                raise
        else:
            engine = _engine(app, overrides, worker_output)
            cluster = engine.start()
            supervise = getattr(engine, "supervise", None)  # (the local engine's alone)
            if restart is not None and supervise is not None:
                cluster.halt_restarts = supervise(restart).halt
            try:
                yield cluster
            except PolybusError as exc:  # what became of workers that went meanwhile
                lost = isinstance(exc, ConnectionLostError | WorkerDiedError | PoisonCallError)
                for line in engine.ended(settle=0.2 if lost else 0.0):
                    exc.add_note(line)
                raise
    finally:
        if engine is not None:
            engine.stop()
        tls.configure(previous_tls)


def _engine(app: AppConfig, overrides: tuple[str, ...], echo: TextIO | None) -> Engine:
    """The engine that starts this run's replicas (each imported only when named). Under
    the mpi engine, every rank but 0 serves its replica here and exits."""
    if app.cluster.engine == "mpi":
        from polybus.engines.mpi import MpiEngine

        mpi = MpiEngine(app, overrides, echo=echo)
        if mpi.rank != 0:
            mpi.serve_rank()
        return mpi
    if app.cluster.engine == "ray":
        from polybus.engines.ray import RayEngine

        return RayEngine(app, overrides, echo=echo)
    from polybus.engines.local import LocalEngine

    return LocalEngine(app, overrides, echo=echo)


def _warn_if_launched(app: AppConfig) -> None:
    """Under mpiexec (or srun) with the local engine, each of the launcher's processes
    runs the whole program with replicas of its own: said, since it is most likely
    a forgotten ``engine = "mpi"``."""
    from polybus.engines.mpi import launched_rank, world_size

    size = world_size()
    if launched_rank() is not None and size is not None and size > 1:
        warnings.warn(str(ConfigError(
            f"started by an MPI launcher as one of {size} processes, with the local "
            f"engine: each process runs the whole program with replicas of its own",
            file=app.origin("cluster.engine"), key="cluster.engine",
            hint='engine = "mpi" runs one rank per replica (--set cluster.engine=mpi)')),
            ConfigWarning, stacklevel=4)


def serving_rank(app: AppConfig) -> bool:
    """This process is an mpi engine's rank that serves a replica (not rank 0's client):
    it must not take what rank 0 takes (the front door's port)."""
    if app.cluster.engine != "mpi":
        return False
    from polybus.engines.mpi import launched_rank

    return bool(launched_rank())
