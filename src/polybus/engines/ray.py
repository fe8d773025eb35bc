"""The ray engine: each replica is an actor of a Ray cluster.

``polybus run app.toml --set cluster.engine=ray`` joins the cluster ``$RAY_ADDRESS``
names (``ray start --head`` on a cluster's head), or starts a private one on this
machine for the run (ended with it), with a CPU for each replica. The run makes the
token and the registry as the local engine does, then starts one actor per replica
(``num_cpus = 1``, named ``polybus-<replica>``); each serves its replica in a thread
(`served.serve_replica`), registers, and is stopped by a method call when the client is
done, then killed.

Ray carries only the start (the registry's address and the token, as actor arguments:
see docs/security.md) and the stop; calls travel on polybus's own transports, the
module's ``ipc`` or ``shm`` to actors on the client's node, TCP to the others. An actor
that cannot start (a module that does not import) fails the run with its error. The
module files are read by path on the actor's node: on a cluster of several nodes, the
same path on each (a shared file system). Ray is imported only here
(``pip install 'polybus[ray]'``).

``$RAY_ADDRESS`` as ``host:port`` (or ``ray://host:port``) is dialled first, for at most
``REACH_S``: Ray's own start waits for ever on an address nothing answers (it tried for
minutes, saying only that its GCS timed out), so one that cannot be reached is a
ConfigError naming it. A private Ray keeps its session files in a directory of the run's
own, removed when it ends, once Ray's daemons have (Ray leaves each session's, 200 KB or
more, in /tmp/ray; a daemon still running wrote there again: rayend.py).

What the actors print goes to the run's worker output (stderr by default), as the local
engine's workers' lines do, and Ray's own messages to stderr, never to stdout
(rayout.py): a private Ray's actors write to log files of the run's, followed and read
to the end at stop (every line, an unfinished last one too); a joined cluster's lines
come as Ray forwards them (without its colour codes and line deduplication). A private
Ray's daemons bind the host's outward address (Ray's choice): a run that starts one
where such an address is up says so.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from polybus.config.model import AppConfig
from polybus.engines import served
from polybus.engines.base import Cluster, run_registry
from polybus.engines.local import START_TIMEOUT
from polybus.engines.logfollow import LogFollower
from polybus.engines.rayend import remove_private
from polybus.engines.rayout import outward_interfaces, ray_cause, ray_death, redirect, route_prints
from polybus.errors import ConfigError, PolybusError, TransportError, error_line
from polybus.registry.service import RegistryService
from polybus.token import make_token

__all__ = ["RayEngine"]

log = logging.getLogger("polybus.engine")

STOP_S = 5.0  # for every actor to stop serving before it is killed regardless
REACH_S = 5.0  # for $RAY_ADDRESS to answer a connection before the run says it cannot
HOW_S = 0.5  # for Ray to say how an actor whose connection closed ended (`how_ended`)


def _ray(file: str | None = None) -> Any:
    """Ray, imported; a ConfigError at ``file`` (where cluster.engine was written: the
    file or --set) if it does not import."""
    # Read by Ray when it is imported: each worker's lines as they are (not "[repeated
    # 3x across cluster]"), with no colour codes in a log or a pipe.
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"the ray engine needs ray, which does not import ({exc})",
                          file=file, key="cluster.engine",
                          hint="pip install 'polybus[ray]'") from None
    return ray


class _Replica:
    """The actor: serves one replica in a thread; `stop` ends it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stop: list[Any] = []
        self._asked = threading.Event()
        self._done = threading.Event()
        self._error: str | None = None

    def serve(self, path: str, overrides: tuple[str, ...], index: int, registry: str,
              token: bytes, client_host: str, output: str | None = None) -> None:
        """Start serving replica ``index`` of the configuration at ``path`` (loaded here
        as the run loaded it); returns once it is registered, or raises the reason it
        could not start. ``output``: the file this process's stdout and stderr go to
        from now on (a private Ray's: the run follows it), its module's import too."""
        from polybus.config import load

        if output is not None:
            redirect(output)
        app = load(path, overrides)
        module, replica = served.replicas_in_order(app)[index]
        started = threading.Event()

        def serving(stop: Any) -> None:
            self._stop.append(stop)
            if self._asked.is_set():
                stop()
            started.set()

        def run() -> None:
            try:
                served.serve_replica(app, module, replica, registry=registry, token=token,
                                     client_host=client_host, here=socket.gethostname(),
                                     on_serving=serving, signals=())
            except BaseException as exc:
                self._error = error_line(exc)  # (as a worker's error line says it)
            finally:
                self._done.set()
                started.set()

        threading.Thread(target=run, name=f"polybus-{replica.name}", daemon=True).start()
        started.wait()
        if self._error is not None:
            raise PolybusError(self._error)

    def __repr__(self) -> str:  # (Ray prefixes the actor's output lines with it)
        return self.name

    def alive(self) -> bool:
        """Answers while the actor lives (`RayEngine.ended` asks)."""
        return True

    def stop(self) -> bool:
        self._asked.set()
        for f in self._stop:
            f()
        done = self._done.wait(STOP_S)
        for stream in (sys.stdout, sys.stderr):  # (what the module printed, all of it)
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        return done


class RayEngine:
    """Starts one Ray actor per replica; stops and kills every one of them."""

    def __init__(self, app: AppConfig, overrides: tuple[str, ...] = (),
                 start_timeout: float = START_TIMEOUT, echo: TextIO | None = None) -> None:
        self.app = app
        self.overrides = overrides
        self.start_timeout = start_timeout
        self.echo = echo
        self.ray = _ray(app.origin("cluster.engine"))
        self.registry: RegistryService | None = None
        self.actors: dict[str, Any] = {}  # replica name -> the actor serving it
        self._own_ray = False
        self._session_dir: str | None = None  # a private Ray's files, removed at stop
        self._outputs: dict[str, Path] = {}  # a private Ray's actors' log files, by name
        self.follower: LogFollower | None = None  # (follows them once all have started)
        self._unroute: Any = None  # puts Ray's printing back (rayout.route_prints)

    def start(self) -> Cluster:
        t0 = time.perf_counter()
        ray = self.ray
        token = make_token()
        try:
            replicas = served.replicas_in_order(self.app)
            if not ray.is_initialized():
                self._init(len(replicas))
            self._enough_cpus(len(replicas))
            self.registry = run_registry(self.app.cluster, token)
            where = self.registry.address
            registry = served.dialled(where)
            actor = ray.remote(max_concurrency=2)(_Replica)  # (serve and stop at once)
            calls = []
            for i, (_, r) in enumerate(replicas):
                output = self._output(r.name)
                a = actor.options(name=f"polybus-{r.name}-{os.getpid()}",
                                  num_cpus=1).remote(r.name)
                self.actors[r.name] = a
                calls.append(a.serve.remote(str(self.app.path), self.overrides, i, registry,
                                            token, socket.gethostname(), output))
            self._wait_ready(calls, [r.name for _, r in replicas])
            # (as the local engine's: a start that fails says the actor's own error)
            if self._outputs:
                self.follower = LogFollower(list(self._outputs.items()), self.echo).start()
        except BaseException:
            self.stop()
            raise
        # (Ray knows how an actor ended only when asked, a moment later: asked off the
        # client's reactor path, client/lossline.py)
        return Cluster(str(where), token, time.perf_counter() - t0,
                       how_ended_later=self.how_ended)

    def _output(self, name: str) -> str | None:
        """The log file replica ``name``'s actor writes its output to (made now, so it
        is followed from its start), in a private Ray's directory; None on a joined
        cluster (Ray forwards it: rayout.py)."""
        if self._session_dir is None:
            return None
        path = Path(self._session_dir) / f"polybus-{name}.log"
        path.touch(mode=0o600)
        self._outputs[name] = path
        return str(path)

    def _init(self, replicas: int) -> None:
        """Join the cluster $RAY_ADDRESS names, or start a private one for this run (never
        one that happens to run here: ``address=None`` would join it) with a CPU for
        each replica, as the local engine starts a process for each whatever the cores.
        The run's own SIGTERM and SIGINT handling is put back after Ray's, and a SIGTERM
        that Ray's took meanwhile is the run's (Ray's made it `sys.exit(15)`)."""
        ray = self.ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        address = os.environ.get("RAY_ADDRESS")
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        kw: dict[str, Any] = {"include_dashboard": False, "configure_logging": False,
                              "log_to_driver": bool(address) and self.echo is not None}
        self._unroute = route_prints(_ray_worker(ray), self.echo)  # (not to stdout)
        try:
            self._start_ray(address, replicas, kw)
        except SystemExit as exc:  # (Ray's own SIGTERM handler during ray.init: the
            # run's handler takes it, as any other time: `polybus run: terminated`)
            term = handlers[signal.SIGTERM]
            if exc.code == signal.SIGTERM and callable(term):
                term(signal.SIGTERM, None)
            raise
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in handlers.items():
                    if handler is not None:
                        signal.signal(sig, handler)
        # (an init cut short is left to Ray's own shutdown at exit: one called on it
        # now crashed the process, SIGSEGV, 2 runs in 12)
        self._own_ray = True

    def _start_ray(self, address: str | None, replicas: int, kw: dict[str, Any]) -> None:
        ray = self.ray
        if address:
            _reach(address)
            try:
                ray.init(address=address, **kw)
            except (ConnectionError, ValueError) as exc:  # ("auto" with none running, a bad form)
                raise _unreachable(address, str(exc)) from None
        else:
            if outward := outward_interfaces():
                log.warning("polybus: warning: the ray engine starts a private Ray, whose "
                            "daemons listen on this host's outward address (%s up), not "
                            "on loopback only: run it in a private network namespace "
                            "(unshare -n), or join a Ray started on loopback (RAY_ADDRESS);"
                            " docs/configuration.md", ", ".join(outward))
            # (short: Ray's socket paths under it must stay within 107 bytes)
            self._session_dir = tempfile.mkdtemp(
                prefix="polybus-ray-", dir="/tmp" if len(tempfile.gettempdir()) > 40 else None)
            ray.init(address="local", num_cpus=max(replicas, os.cpu_count() or 1),
                     _temp_dir=self._session_dir, **kw)

    def _enough_cpus(self, replicas: int) -> None:
        """Each actor takes a CPU of the cluster's: fewer than the replicas is said now,
        not as a start that never ends."""
        have = self.ray.cluster_resources().get("CPU", 0)
        if have < replicas:
            who = f"each of the {replicas} replicas" if replicas != 1 else "its one replica"
            raise ConfigError(
                f"the ray engine runs {who} as an actor of one CPU; this Ray cluster has "
                f"{have:g}",
                file=self.app.origin("cluster.engine"),
                key="cluster.engine", hint="fewer replicas, or a cluster with more CPUs "
                "(ray start --head --num-cpus N, then RAY_ADDRESS=auto)")

    def _wait_ready(self, calls: list[Any], names: list[str]) -> None:
        """Every actor's ``serve`` returned: each has registered (registration is part
        of starting to serve), or the first that could not start is raised."""
        ray = self.ray
        try:
            ray.get(calls, timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            done, _ = ray.wait(calls, num_returns=len(calls), timeout=0)
            late = [n for n, ref in zip(names, calls, strict=True) if ref not in done]
            raise TransportError(
                f"not started within {self.start_timeout:g} s: {', '.join(late)} (a module "
                f"slow to import, or one that hangs there; or CPUs of the Ray cluster "
                f"taken by other work)") from None
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
            # (a module that raised; or an actor whose process ended as it started: an
            # os._exit or a crash in its module's import, the OOM killer)
            done, _ = ray.wait(calls, num_returns=len(calls), timeout=0)
            for name, ref in zip(names, calls, strict=True):
                if ref in done:
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayTaskError as err:
                        raise PolybusError(f"worker {name} (a Ray actor) could not start: "
                                           f"{ray_cause(err)}") from None
                    except ray.exceptions.RayActorError as err:
                        raise PolybusError(f"worker {name} (a Ray actor) ended while "
                                           f"starting: {ray_death(err)}") from None
            raise PolybusError(f"a Ray actor could not start: {ray_cause(exc)}") from None

    def stop(self) -> None:
        """Each actor told to stop serving (waited for, boundedly), then killed; the
        registry closed; a Ray this run started, shut down."""
        ray = self.ray
        actors, self.actors = list(self.actors.values()), {}
        if actors:
            try:
                ray.get([a.stop.remote() for a in actors], timeout=STOP_S)
            except Exception:  # (a dead or stuck actor: killed below all the same)
                pass
            for a in actors:
                try:
                    ray.kill(a)
                except Exception:
                    pass
        if self.follower is not None:  # (each actor flushed its output as it stopped)
            follower, self.follower = self.follower, None
            follower.close()
        if self.registry is not None:
            self.registry.close()
            self.registry = None
        if self._own_ray:
            self._own_ray = False
            ray.shutdown()
        if self._unroute is not None:
            unroute, self._unroute = self._unroute, None
            unroute()
        if self._session_dir is not None:  # (once Ray's daemons have ended: rayend.py)
            session, self._session_dir = self._session_dir, None
            if left := remove_private(session):
                log.warning("polybus: warning: Ray's processes %s did not end when told "
                            "to (SIGTERM, SIGKILL)", ", ".join(map(str, left)))

    def ended(self, settle: float = 0.0) -> list[str]:
        """One line for each actor that ended before it was stopped, with what Ray says
        of its death (the exit type and detail; Ray does not know a signal), found by
        asking each actor to answer (at most ``settle`` s, and 2 s, for all)."""
        ray = self.ray
        refs = {name: a.alive.remote() for name, a in self.actors.items()}
        if not refs:
            return []
        done, _ = ray.wait(list(refs.values()), num_returns=len(refs),
                           timeout=max(settle, 2.0))
        out = []
        for name, ref in refs.items():
            if ref in done:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    out.append(f"worker {name} (a Ray actor) ended: {ray_death(exc)}")
                except Exception:  # (a lost connection to Ray itself: nothing to say)
                    pass
        return out


    def how_ended(self, name: str, settle: float = HOW_S) -> str | None:
        """How replica ``name``'s actor ended, as Ray says it ("(a Ray actor) ended: ...
        (Ray: SYSTEM_ERROR)"), asked when its connection closed: None if it answers, or
        Ray says nothing within ``settle`` s."""
        ray = self.ray
        actor = self.actors.get(name)
        if actor is None:
            return None
        try:
            ray.get(actor.alive.remote(), timeout=settle)
        except ray.exceptions.RayActorError as exc:
            return f"(a Ray actor) ended: {ray_death(exc)}"
        except Exception:  # (no answer in time, or Ray itself gone: nothing to say)
            return None
        return None


def _ray_worker(ray: Any) -> Any:
    """Ray's driver module, whose printing `route_prints` takes over (None if absent)."""
    private = getattr(ray, "_private", None)
    return getattr(private, "worker", None)


def _reach(address: str) -> None:
    """Dial ``host:port`` (or ``ray://host:port``) once, for at most `REACH_S`; a
    ConfigError naming $RAY_ADDRESS if nothing answers. Other forms ("auto") are Ray's."""
    m = re.fullmatch(r"(?:ray://)?\[?([^\]\s]+?)\]?:(\d+)", address.strip())
    if m is None:
        return
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=REACH_S).close()
    except OSError as exc:
        raise _unreachable(address, exc.strerror or str(exc) or type(exc).__name__) from None


def _unreachable(address: str, why: str) -> ConfigError:
    return ConfigError(f"the ray engine joins the Ray cluster $RAY_ADDRESS names, and "
                       f"{address!r} cannot be reached: {why}", key="cluster.engine",
                       hint="start it (ray start --head) and set RAY_ADDRESS to the address "
                       "it prints, or unset RAY_ADDRESS for a Ray of the run's own")
