"""The mpi engine: a program launched by ``mpiexec`` (or ``srun``), one rank per replica.

``mpiexec -n 1+R polybus run app.toml --set cluster.engine=mpi``, where R is the number
of replicas the configuration's server modules ask for. Every rank loads the same
configuration. Rank 0 runs the registry and the client; rank i (1..R) serves the i-th
replica, the server modules taken in their order in the file and each module's
replicas in order (`replica_of`). MPI carries the start and the end only:

1. rank 0 makes the run's token and the registry, and broadcasts both (MPI's own
   channels are the launcher's, inside the job; see docs/security.md);
2. each other rank serves its replica and registers; one that cannot start (a module
   that does not import) sends rank 0 its error, which rank 0 raises, naming the rank;
   one whose replica stops while serving (a thread of its worker ended by an exception)
   sends it too, at once, and rank 0 says it and goes on as when a local worker is lost
   (engines/mpireports.py); such a rank waits, serving nothing, for the job's end;
3. when the client is done, rank 0 sends each rank a stop; each stops serving and its
   process exits (as dask-mpi's workers do: a rank that served never returns to the
   program that called `polybus.run`).

Ctrl-C at a terminal reaches only the launcher: Open MPI puts each rank in a process
group of its own. The launcher then ends the job, sending each rank SIGCONT, SIGTERM
and at last SIGKILL, 0.25 s apart (fixed in Open MPI 5's launcher, PRRTE: no option
changes it), and no longer passes on what the ranks print. So rank 0, told SIGTERM
after the SIGCONT, raises `LauncherStopped` (an interruption, as Ctrl-C's) without
waiting for the ranks the launcher is ending, and what it says from then on goes
straight to the launcher's own stderr (the terminal), when it runs on that host.
Nothing on its way out may wait: the SIGKILL comes within 0.25 s (a loss line waiting
for a rank's report, the replica's connection closed by that same SIGTERM, held the
line past it: client/lossline.py).

Every rank ends with a barrier, waited for at most ``END_S``: a rank that never gets
there (stuck importing its module, or in a call that does not end) would hold the job
in MPI's finalize for good, so then rank 0 aborts the job once it has said why. A rank
that reported its replica's end waits for rank 0's stop however long the run lasts (it
waited 60 s, then ``END_S`` at a barrier rank 0 was not at, and aborted the job: a run
ended 75 s after the fault, unsaid); the launcher's SIGTERM ends it meanwhile. A start
that fails on rank 0 before the broadcast broadcasts the failure instead, and the other
ranks end at once.

Calls travel on polybus's own transports, as with any engine: TCP, and the module's
``ipc`` or ``shm`` between ranks on rank 0's host. Placement is the launcher's
(``--host``, ``--map-by``). Across hosts, ``[cluster] listen_host`` must be an address
the other hosts reach: a wildcard (``"0.0.0.0"``) binds every interface and registers
each rank's host name. mpi4py is imported only here (``pip install polybus[mpi]``).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, NoReturn, TextIO

from polybus.config.model import AppConfig, ModuleSpec, ReplicaSpec
from polybus.engines import served
from polybus.engines.base import Cluster, run_registry
from polybus.engines.launchenv import launched_rank, rank_blas, world_size
from polybus.engines.local import START_TIMEOUT
from polybus.engines.mpilauncher import LauncherStopped, launcher_stderr
from polybus.engines.mpireports import TAG_FAILED, Reports
from polybus.errors import ConfigError, PolybusError, TransportError, error_line
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.token import make_token

__all__ = ["LauncherStopped", "MpiEngine", "launched_rank", "replica_of", "world_size"]

TAG_STOP = 7102    # rank 0 to each rank: the client is done (TAG_FAILED: mpireports.py)
_POLL_S = 0.02  # how often a rank looks for a message or a barrier (no busy MPI wait)
# What stops a serving rank (worker/main.py's handlers, which only note it once serving
# is over): their default action once its replica has ended, so that the launcher's
# SIGTERM ends it while it waits for rank 0's stop
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
END_S = 15.0  # for every rank to reach the last barrier; past it, the job is aborted


def replica_of(app: AppConfig, rank: int) -> tuple[ModuleSpec, ReplicaSpec]:
    return served.replicas_in_order(app)[rank - 1]


# A process that no launcher started (engines/launchenv.py reads what one sets) does not
# initialize MPI at all: it is told how to launch (initializing MPI alone, as a
# singleton, ended a test runner).
def _world(file: str | None = None) -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ConfigError(f"the mpi engine needs mpi4py, which does not import ({exc})",
                          file=file, key="cluster.engine",
                          hint="pip install 'polybus[mpi]' (mpi4py and Open MPI)") from None
    return MPI


def _check_size(app: AppConfig, size: int, launched: bool = True) -> None:
    """The same check on every rank, so every rank stops with the same error (none is
    left waiting in a broadcast the others never make). Started without a launcher, and
    without mpi4py, it says mpi4py is missing too, as ``polybus check`` does: launched,
    it would fail on that next."""
    want = 1 + len(served.replicas_in_order(app))
    if size != want:
        how = (f"on {size} rank{'s' if size != 1 else ''}" if launched
               else "without mpiexec (1 process)")
        try:
            where = os.path.relpath(app.path)
        except ValueError:
            where = str(app.path)
        missing = not launched and importlib.util.find_spec("mpi4py") is None
        raise ConfigError(
            f"the mpi engine runs one rank for the client and one per replica: this "
            f"configuration has {want - 1} replica(s), so {want} ranks; it was started "
            f"{how}" + ("; and it needs mpi4py, which is not installed" if missing else ""),
            file=app.origin("cluster.engine"), key="cluster.engine",
            hint=("pip install 'polybus[mpi]', then " if missing
                  else "")
            + f"mpiexec -n {want} polybus run {shlex.quote(where)} ... (with "
              f"--oversubscribe if that is more than this host's cores)")


def _until(done: Callable[[], bool], seconds: float | None = None) -> bool:
    """Look at ``done`` every _POLL_S until it is true (a blocking MPI wait spins a
    CPU); False if ``seconds`` pass first."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not done():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _barrier(comm: Any, seconds: float, meanwhile: Callable[[], None] | None = None) -> bool:
    """Every rank met here within ``seconds`` (a non-blocking barrier); ``meanwhile``
    called at each look."""
    req = comm.Ibarrier()

    def met() -> bool:
        if meanwhile is not None:
            meanwhile()
        return bool(req.Test())

    return _until(met, seconds)


class MpiEngine:
    """Rank 0's side (`start`, `stop`); the other ranks call `serve_rank` and never
    return."""

    def __init__(self, app: AppConfig, overrides: tuple[str, ...] = (),
                 start_timeout: float = START_TIMEOUT, echo: TextIO | None = None) -> None:
        self.app = app
        self.overrides = overrides
        self.start_timeout = start_timeout
        if launched_rank() is None:
            _check_size(app, 1, launched=False)  # (raises: one process, no launcher)
        self.mpi = _world(app.origin("cluster.engine"))
        self.comm = self.mpi.COMM_WORLD
        self.rank: int = self.comm.Get_rank()
        self.registry: RegistryService | None = None
        self._told = False    # the start was broadcast (or its failure): barrier at the end
        self._serving = False  # ... and the ranks serve: each is sent a stop
        self._continued = False  # a SIGCONT came: the first of the launcher's stop signals
        self._ending = False  # the launcher is ending the job: no rank is waited for
        self._handlers: dict[int, Any] = {}  # the signal handlers ours replaced
        self._stderr: int | None = None  # the launcher's stderr
        self._lost: dict[str, None] = {}  # replicas whose connection closed, in order
        self._starting: tuple[str, ...] = ()  # replicas not registered yet, with ranks
        self.reports = Reports(self.comm, self.mpi, {
            i + 1: r.name for i, (_, r) in enumerate(served.replicas_in_order(app))})

    def start(self) -> Cluster:
        t0 = time.perf_counter()
        _check_size(self.app, self.comm.Get_size())
        self._watch_launcher()
        cluster = self.app.cluster
        token = make_token()
        try:
            try:
                self.registry = run_registry(cluster, token)
            except BaseException as exc:  # (the other ranks are told, and end)
                self._told = True
                self.comm.bcast({"failed": f"{type(exc).__name__}: {exc}"}, root=0)
                raise
            address = self.registry.address
            self.comm.bcast({"token": token, "registry": served.dialled(address),
                             "host": self.mpi.Get_processor_name()}, root=0)
            self._told = self._serving = True
            self._wait_ready(str(address), token)
            self.reports.watch()  # (a replica that stops from now on: mpireports.py)
        except BaseException:
            self.stop()
            raise
        # (a report comes a moment after its replica's connections close: waited for
        # off the client's reactor path, as the local engine's exit status is not)
        return Cluster(str(address), token, time.perf_counter() - t0,
                       how_ended=self._heard, how_ended_later=self.reports.how_ended)

    def _heard(self, name: str) -> str | None:
        """Replica ``name`` was lost (its connection closed): how it ended if its rank
        reported it; else noted, so that the launcher's stop that follows a rank's death
        names it (`LauncherStopped`)."""
        self._lost[name] = None
        return self.reports.said(name)

    def _watch_launcher(self) -> None:
        """Take the launcher's stop (SIGCONT, then SIGTERM) as an interruption; other
        signals as before. (From the main thread only: Python's rule.)"""
        if threading.current_thread() is not threading.main_thread():
            return
        self._stderr = launcher_stderr()
        for sig, handler in ((signal.SIGCONT, self._on_cont), (signal.SIGTERM, self._on_term)):
            self._handlers[sig] = signal.signal(sig, handler)

    def _on_cont(self, signum: int, frame: FrameType | None) -> None:
        self._continued = True
        before = self._handlers.get(signum)
        if callable(before):
            before(signum, frame)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        before = self._handlers.get(signum)
        if not self._continued:  # (not the launcher's: as before this engine)
            if callable(before):
                before(signum, frame)
            elif before != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
            return
        self._ending = True
        if self._stderr is not None:  # (the launcher no longer passes ours on)
            try:
                sys.stderr.flush()
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
            os.dup2(self._stderr, 2)
            os.dup2(self._stderr, 1)
        ranks = {n: r for r, n in self.reports.names.items()}
        raise LauncherStopped(tuple(f"{n} (mpi rank {ranks[n]})" for n in list(self._lost)
                                    if n in ranks and n not in self.reports.stopped),
                              self._starting)

    def _unwatch(self) -> None:
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._handlers.clear()
        if self._stderr is not None:
            os.close(self._stderr)
            self._stderr = None

    def _wait_ready(self, registry: str, token: bytes) -> None:
        names = {r.name: i + 1 for i, (_, r) in enumerate(served.replicas_in_order(self.app))}
        client = RegistryClient(registry, token)
        deadline = time.monotonic() + self.start_timeout

        def starting(missing: Iterable[str]) -> tuple[str, ...]:  # (said by `_on_term`)
            return tuple(f"{n} (mpi rank {names[n]})" for n in sorted(missing, key=lambda n: names[n]))

        self._starting = starting(names)  # (every one, till the registry is first asked)
        try:
            while True:
                status = self.mpi.Status()
                if self.comm.iprobe(source=self.mpi.ANY_SOURCE, tag=TAG_FAILED, status=status):
                    rank = status.Get_source()
                    why = self.comm.recv(source=rank, tag=TAG_FAILED)
                    name = next((n for n, r in names.items() if r == rank), "?")
                    raise PolybusError(f"worker {name} (mpi rank {rank}) could not start: {why}")
                missing = set(names) - {r.name for r in client.resolve()}
                self._starting = starting(missing)
                if not missing:
                    return
                if time.monotonic() > deadline:
                    ranks = ", ".join(f"{n} (rank {names[n]})" for n in sorted(missing))
                    raise TransportError(
                        f"not registered within {self.start_timeout:g} s: {ranks} (a "
                        f"module slow to import, or one that hangs there; or ranks on other "
                        f"hosts that cannot reach [cluster] listen_host "
                        f"{self.app.cluster.listen_host!r})")
                time.sleep(_POLL_S)
        finally:
            self._starting = ()
            client.close()

    def stop(self) -> None:
        """Every serving rank told to stop, every rank met at the last barrier (else the
        job is aborted when this process exits, once the run has said why), the
        registry closed. Not the ranks when the launcher is ending the job: it ends them.
        Reports of replicas that stopped are taken until the barrier is met."""
        self.reports.unwatch()
        if self._ending:
            self._serving = self._told = False
        if self._serving:
            self._serving = False
            reqs = [self.comm.isend(None, dest=r, tag=TAG_STOP)
                    for r in range(1, self.comm.Get_size())]
            self.mpi.Request.waitall(reqs)
        if self._told:
            self._told = False
            if _barrier(self.comm, END_S, self.reports.settle):
                self.reports.settle()  # (one sent just before its rank's barrier)
            else:
                atexit.register(self.comm.Abort, 1)  # (after mpi4py's finalize is queued)
        if self.registry is not None:
            self.registry.close()
            self.registry = None
        self._unwatch()

    def ended(self, settle: float = 0.0) -> list[str]:
        """What became of the replicas: those whose rank reported they stopped while
        serving (mpireports.py). A rank that dies outright ends the whole job (the
        launcher's rule), and there is nothing left to report it."""
        return self.reports.ended(settle)

    def serve_rank(self) -> NoReturn:
        """This rank's replica, served until rank 0 says stop; then the last barrier, and
        the process exits (status 0, or 1 if the replica could not start). A replica that
        stops on its own is reported to rank 0 at once; the rank then waits for the stop
        (leaving the job early would have the launcher end it) and exits 0: the run says
        what became of it, and its status is the program's, as under the local engine."""
        _check_size(self.app, self.comm.Get_size())
        module, replica = replica_of(self.app, self.rank)
        # (its share of the host's CPUs for BLAS, as a local worker's: of its cpus too)
        rank_blas(module.cpus_of(replica.name))
        start = self.comm.bcast(None, root=0)
        if "failed" in start:  # (rank 0 reports it)
            self._end(0)
        stopped = threading.Event()
        stop_serving: list[Any] = []

        def watch() -> None:  # rank 0's stop, looked for now and then (MPI would spin)
            req = self.comm.irecv(source=0, tag=TAG_STOP)
            _until(lambda: bool(req.test()[0]))
            stopped.set()
            for f in stop_serving:
                f()

        threading.Thread(target=watch, name="polybus-mpi-stop", daemon=True).start()

        def serving(stop: Any) -> None:
            stop_serving.append(stop)
            if stopped.is_set():
                stop()

        status = 0
        try:
            served.serve_replica(self.app, module, replica, registry=start["registry"],
                                 token=start["token"], client_host=start["host"],
                                 here=self.mpi.Get_processor_name(), on_serving=serving)
        except BaseException as exc:  # (told to rank 0: it raises a failed start, and
            # says a replica that stopped while serving: mpireports.py)
            status = 0 if stop_serving else 1
            self.comm.send(error_line(exc), dest=0, tag=TAG_FAILED)  # (as a worker's)
            if threading.current_thread() is threading.main_thread():
                for sig in _STOPS:
                    if signal.getsignal(sig) != signal.SIG_IGN:  # (nohup's SIGHUP stays)
                        signal.signal(sig, signal.SIG_DFL)
            stopped.wait()  # (rank 0 sends every rank its stop as the run ends)
        self._end(status)

    def _end(self, status: int) -> NoReturn:
        sys.stdout.flush()
        if not _barrier(self.comm, END_S):
            sys.stderr.flush()
            self.comm.Abort(status or 1)
        sys.exit(status)
