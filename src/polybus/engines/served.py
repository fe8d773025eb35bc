"""A replica served inside a process another launcher started (an MPI rank, a Ray
actor): which replicas a configuration asks for, in order, and serving one of them.

The process is not one the local engine spawned, so it makes what the local engine
would have given it: its listen addresses (the module's ``ipc`` or ``shm`` only when it
is on the client's host, in a private run directory removed when it stops; TCP always),
and the host it registers for a wildcard bind (its own name).
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

from polybus.config.model import AppConfig, ModuleSpec, ReplicaSpec
from polybus.engines.local import transports_for
from polybus.engines.rundir import make_run_dir, remove_stale_run_dirs
from polybus.errors import ConfigError
from polybus.transport.endpoints import WILDCARDS, Address

__all__ = ["dialled", "listen_addresses", "replicas_in_order", "serve_replica"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def replicas_in_order(app: AppConfig) -> list[tuple[ModuleSpec, ReplicaSpec]]:
    """Every replica the configuration asks for: server modules in the file's order,
    each module's replicas in order."""
    return [(m, r) for m in app.servers() for r in m.replication]


def dialled(address: Address) -> str:
    """Where others dial a TCP listener at ``address`` (a wildcard: this host's name)."""
    host = socket.gethostname() if address.host in WILDCARDS else address.host
    return str(dataclasses.replace(address, host=host))


def listen_addresses(app: AppConfig, key: str, name: str, host: str, *, local: bool,
                     tcp_first: bool = False) -> tuple[list[str], Path | None]:
    """Where replica ``name`` of module ``key`` listens when no launcher chose: TCP on
    ``host``, and, if it is on the client's host (``local``), the ``ipc`` or ``shm`` its
    module or a binding asks for, in a new private run directory (returned, for the
    caller to remove when the replica stops; the socket files are named by scheme, not
    by the replica's name, which could make their path too long for a Unix socket). The module's transport is the main
    address (the first), or TCP with ``tcp_first`` (a replica a client on another host
    may use)."""
    schemes = transports_for(app, key) if local else ["tcp"]
    if tcp_first:
        schemes = ["tcp", *(s for s in schemes if s != "tcp")]
    rundir: Path | None = None
    if any(s != "tcp" for s in schemes):
        remove_stale_run_dirs()  # (a replica killed outright could not remove its own)
        rundir = make_run_dir()
    return [f"tcp://{host}:0" if rundir is None or s == "tcp"
            else f"{s}://{rundir / f'0.{s}'}" for s in schemes], rundir


def serve_replica(app: AppConfig, module: ModuleSpec, replica: ReplicaSpec, *,
                  registry: str, token: bytes, client_host: str, here: str,
                  on_serving: Callable[[Callable[[], None]], None],
                  signals: Sequence[signal.Signals] | None = None) -> None:
    """Serve ``replica`` until stopped (through ``on_serving``'s function or a signal).
    ``here`` and ``client_host``: this process's host and the client's, as the launcher
    names them; ConfigError if they differ and ``listen_host`` is loopback. A mistake of
    the configuration found as it starts (that one, its certificate checked against the
    host it registers) is said at the line that wrote its key, or at the overrides that
    did, as a worker of the local engine says it (`config.placed`)."""
    from polybus.config import placed

    try:
        _serve(app, module, replica, registry=registry, token=token,
               client_host=client_host, here=here, on_serving=on_serving, signals=signals)
    except ConfigError as exc:
        raise placed(exc, app) from None


def _serve(app: AppConfig, module: ModuleSpec, replica: ReplicaSpec, *, registry: str,
           token: bytes, client_host: str, here: str,
           on_serving: Callable[[Callable[[], None]], None],
           signals: Sequence[signal.Signals] | None) -> None:
    from polybus.transport import tls
    from polybus.worker.main import listen_host_hint, serve

    cluster = app.cluster
    local = here == client_host
    if not local and cluster.listen_host in _LOOPBACK:
        raise ConfigError(
            f"this replica is on {here}, the client on {client_host}: listening on "
            f"{cluster.listen_host} it cannot be reached",
            key="cluster.listen_host",  # (placed by serve_replica)
            hint='listen_host = "0.0.0.0" (every interface; each replica registers its '
                 'host name), with [cluster] tls for traffic between hosts')
    tls.configure_cluster(cluster)
    listen, rundir = listen_addresses(app, module.key, replica.name,
                                      cluster.listen_host, local=local)
    http = app.serve.interfaces_of(module.key) if app.serve is not None else []
    try:
        serve(registry=registry, module_path=module.source, name=replica.name,
              module_key=module.key, token=token, listen=listen, spec=module,
              replica=replica, heartbeat=cluster.heartbeat, max_frame=cluster.max_frame,
              http=http, advertise=socket.gethostname(), on_serving=on_serving,
              signals=signals, banner=False,
              cert_hint=listen_host_hint(cluster.listen_host))
    finally:
        if rundir is not None:
            shutil.rmtree(rundir, ignore_errors=True)
