"""polybus worker: serve a module's functions, registered with a registry."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from polybus.cli.values import check_name, heartbeat_seconds
from polybus.config.cluster import check_registry_option
from polybus.config.files import not_a_file
from polybus.config.registrynames import default_replica_name, replica_name_fault, shown
from polybus.errors import AuthenticationError, ConfigError, TransportError, UsageError
from polybus.plural import plural
from polybus.token import cluster_token, token_source

if TYPE_CHECKING:
    from polybus.config.model import AppConfig, ReplicaSpec

# --set with --module: refused, not dropped (the worker then ran with its own defaults,
# 1 GiB frames, whatever cluster.max_frame said)
_NO_CONFIG = ("--set {}: --set overrides a key of --config, and --module serves with no "
              "configuration; write the keys in a configuration and serve its module with "
              "--config FILE --as KEY (and --set there)")

# --as with --module: refused, not dropped (the worker registered under the file's stem,
# and a run looking for [modules.KEY] found none)
_AS_NO_CONFIG = ("--as {0}: --as names a module of --config, and no --config was given; "
                 "a worker of --module FILE serves the module named by FILE's stem ('{1}'); "
                 "to serve it as '{0}', give --config app.toml --as {0}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", metavar="HOST:PORT",
                   help="the registry to register with (default: --config's [cluster] "
                        "registry)")
    p.add_argument("--module", metavar="FILE",
                   help="the module to serve (all its public functions), registered as "
                        "the module named by FILE's stem (server.py: 'server')")
    p.add_argument("--config", metavar="FILE", help="serve a module of this configuration ...")
    p.add_argument("--as", dest="as_key", metavar="KEY", help="... the one under [modules.KEY]")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of --config, as `polybus run --set` does "
                        "(repeatable; only with --config: --module has no configuration "
                        "to override)")
    p.add_argument("--name", help="replica name, as replication writes one (letters, "
                                   "digits, _ . -; default: module-hostname-pid, any other "
                                   "character of the module's name as _)")
    p.add_argument("--listen", action="append", metavar="ADDRESS",
                   help="tcp://HOST:PORT, ipc:///PATH or shm:///PATH; repeat to listen on "
                        "several (the first is the replica's main address; "
                        "default tcp://127.0.0.1:0, and with --config also the "
                        "module's ipc or shm, in a private directory)")
    p.add_argument("--token-file", metavar="FILE",
                   help="read the cluster token from FILE (else $POLYBUS_TOKEN, else "
                        "the configuration's [cluster] token_file)")
    p.add_argument("--heartbeat", type=heartbeat_seconds, default=None, metavar="DURATION",
                   help="seconds between heartbeats (default: --config's [cluster] "
                        "heartbeat, else 1)")
    p.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    # With --exit-with-parent: the pid of the process that started this one. If it is
    # gone already, the kernel will send no death signal; the worker ends at once.
    p.add_argument("--parent", type=int, metavar="PID", help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    from polybus.transport.endpoints import Address
    from polybus.transport.inproc import ONE_PROCESS
    from polybus.worker.main import LISTEN_HINT, listen_host_hint, serve

    check_registry_option(args.registry)  # (as [cluster] registry is checked)
    if args.name is not None and (fault := replica_name_fault(args.name)) is not None:
        raise UsageError(f"--name {shown(args.name)}: {fault}")  # ('' was the default name)
    for where in args.listen or []:  # (before the module is imported: a typo costs nothing)
        if Address.parse(where).scheme == "inproc":
            raise UsageError(f"--listen {where!r}: {ONE_PROCESS}; a worker is dialled from "
                             "other processes: use tcp://, ipc:// or shm://")
    config_token_file = config_registry = None
    spec = replica = None
    loaded: AppConfig | None = None  # (--config's: where a mistake found later is said)
    max_frame = 1 << 30
    heartbeat = 1.0
    http: list[str] = []
    if args.config is not None:  # ("": said to be empty, not taken for no --config)
        from polybus.config import load

        if not args.as_key:
            raise UsageError("--config needs --as KEY (which [modules.KEY] to serve)")
        if args.module:  # (it was dropped unsaid: the configuration's module served)
            raise UsageError(f"--module {args.module}: give --module FILE or --config FILE "
                             f"--as KEY, not both (--config serves [modules.{args.as_key}] "
                             "as configured, from its source)")
        # (the address it registers is checked against its certificate as it starts)
        app = loaded = load(args.config, tuple(args.set), tls_hosts="worker")
        config_token_file = app.cluster.token_file
        config_registry = app.cluster.registry
        from polybus.transport import tls

        tls.configure_cluster(app.cluster)  # [cluster] tls: this worker's listen and connects
        if args.as_key not in app.modules:
            raise UsageError(_no_module(args.config, args.as_key, app))
        spec = app.modules[args.as_key]
        path, key = spec.source, spec.key
        if spec.in_client and spec.entrypoint is None:
            raise UsageError(f"[modules.{key}] of {args.config} has replication = 0: its "
                             "interfaces are called in the client's process, and no worker "
                             "serves it; give it replicas to serve it from workers "
                             f"(--set modules.{key}.replication=N, the same for the run)")
        if key == app.client and not spec.replication:  # (--as client: most likely a slip)
            print(f"polybus worker: warning: [modules.{key}] is the client of "
                  f"{args.config} (its entrypoint runs in `polybus run`, and nothing is "
                  f"bound to it); serving it anyway", file=sys.stderr, flush=True)
        max_frame = app.cluster.max_frame
        # The local engine's registry drops a replica silent for 3 x this: a worker it
        # starts (with --config) must heartbeat at the configured rate, not at 1 s.
        heartbeat = app.cluster.heartbeat
        http = app.serve.interfaces_of(key) if app.serve is not None else []
        if args.name:
            replica = next((r for r in spec.replication if r.name == args.name), None)
    elif args.module:
        if args.set:  # (--module builds no configuration: a --set would be dropped unsaid)
            raise UsageError(_NO_CONFIG.format(args.set[0]))
        if args.as_key:  # (dropped unsaid too: served under the file's stem)
            raise UsageError(_AS_NO_CONFIG.format(args.as_key, Path(args.module).stem))
        check_name(args.module, "--module")
        path = Path(args.module)
        why = not_a_file(path)
        if why == "not found":  # (said here, as run and check say it: with the nearest)
            from polybus.config.schema import nearest_file

            hint = nearest_file(args.module, path.resolve())
            raise UsageError(f"--module: {args.module} does not exist"
                             + (f"; {hint}" if hint else ""))
        if why is not None:  # (a directory was said not to exist)
            raise UsageError(f"--module: {args.module} {why}; give the module's Python file")
        key = path.stem
    else:
        raise UsageError("give --module FILE, or --config FILE --as KEY")
    registry = args.registry or config_registry
    if registry is None:
        raise UsageError("give --registry HOST:PORT (or --config a configuration whose "
                         "[cluster] registry names it)")
    token = cluster_token(args.token_file, config_token_file)
    assert token is not None
    name = (args.name if args.name is not None  # (a module's file "my server.py": my_server-...)
            else default_replica_name(key, socket.gethostname(), os.getpid()))
    slowed = [r for r in spec.replication if r.speed != 1.0] if spec is not None else []
    if slowed and replica is None:  # (a speed is its replica's: not dropped unsaid)
        print(f"polybus worker: warning: {_speeds(key, slowed)}, and this worker, {name}, "
              f"is none of its replicas: it serves at full speed (give it --name "
              f"{slowed[0].name} to serve as that replica)", file=sys.stderr, flush=True)
    listen, rundir = args.listen or ["tcp://127.0.0.1:0"], None
    listen_from = None
    cert_hint = LISTEN_HINT
    if loaded is not None and (args.exit_with_parent or not args.listen):
        # (its TCP host is the file's listen_host: as the local engine, which starts
        # it with --exit-with-parent, gives it, or as it takes it without --listen)
        cert_hint = listen_host_hint(loaded.cluster.listen_host)
    if args.config and not args.listen:
        # The module's own transport too (ipc, shm), as the local engine's workers
        # listen: a configuration's `transport` holds for workers started by hand.
        # TCP stays the main address, for clients on other hosts, at [cluster]
        # listen_host (loopback unless the configuration says otherwise).
        from polybus.config.model import ClusterSpec
        from polybus.engines.served import listen_addresses

        host = app.cluster.listen_host
        listen, rundir = listen_addresses(app, key, name, host, local=True, tcp_first=True)
        if host != ClusterSpec.listen_host:  # (said in the banner: not the default)
            listen_from = f"listen_host from {app.origin('cluster.listen_host')}"
    try:
        stopped = serve(registry=registry, module_path=path, name=name, module_key=key,
                        token=token, listen=listen, spec=spec, replica=replica,
                        heartbeat=args.heartbeat if args.heartbeat is not None else heartbeat,
                        max_frame=max_frame, exit_with_parent=args.exit_with_parent,
                        parent=args.parent, http=http, listen_from=listen_from,
                        cert_hint=cert_hint, by_hand=not args.exit_with_parent)
    except ConfigError as exc:  # (its certificate, checked at start against the address
        if loaded is None:      # it registers: said at the line, as loading says the rest)
            raise
        from polybus.config import placed

        raise placed(exc, loaded) from None
    except AuthenticationError as exc:
        exc.add_note(f"this worker's token came from "
                     f"{token_source(args.token_file, config_token_file)}")
        raise
    except TransportError as exc:  # (a host not of this machine: said where it was written)
        if listen_from is not None and str(exc).startswith(f"cannot listen on {listen[0]}:"):
            exc.add_note(f"the host is [cluster] {listen_from}; give this host's address "
                         "there, or --listen tcp://HOST:0")
        raise
    finally:
        if rundir is not None:
            shutil.rmtree(rundir, ignore_errors=True)
    if args.exit_with_parent:
        # An engine's worker, stopped by its engine (or its SIGTERM by hand, `kill PID`):
        # 0, a clean end, which serve's supervisor does not start again, and nothing said
        # in a log the run forwards.
        return 0
    # By hand: said and exited as `run` and `serve` are ("polybus worker: interrupted",
    # 130; "terminated", 143), with the calls it held that went unanswered.
    from polybus.cli.main import stopped_by

    n = stopped.unanswered
    more = (f"; {plural(n, 'call')} it held {'was' if n == 1 else 'were'} left unanswered "
            f"(still running, or queued)" if n else "")
    return stopped_by("worker", stopped.signum, more)


def _no_module(config: str, as_key: str, app: AppConfig) -> str:
    """What --as names no module of ``config``: the nearest module a worker serves, as
    other misspelt names get, else those it serves (modules with replicas: not the
    client, whose entrypoint runs in `polybus run`)."""
    from polybus.config.problems import nearest

    served = [m.key for m in app.servers()]
    return f"{config} has no [modules.{as_key}]: " + (
        nearest(as_key, served)
        or (f"the modules it serves are {', '.join(served)}" if served
            else "it serves no module (none has replicas)"))


def _speeds(key: str, slowed: list[ReplicaSpec]) -> str:
    """``[modules.KEY] replication gives replica a speed 0.25`` (``replicas a, b speeds
    0.25, 0.5``)."""
    names = ", ".join(r.name for r in slowed)
    speeds = ", ".join(f"{r.speed:g}" for r in slowed)
    many = len(slowed) > 1
    return (f"[modules.{key}] replication gives replica{'s' * many} {names} "
            f"speed{'s' * many} {speeds}")
