"""polybus registry: a name server for workers started by hand."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from polybus.cli.values import seconds
from polybus.errors import TransportError, UsageError
from polybus.registry.service import RegistryService
from polybus.stopsignals import StopSignals
from polybus.token import cluster_token, make_token, write_token_file
from polybus.transport.endpoints import Address
from polybus.transport.inproc import ONE_PROCESS
from polybus.transport.reach import plain_beyond


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="where to listen (default: --config's [cluster] registry, else "
                        "its listen_host, else loopback; on a free port)")
    p.add_argument("--token-file", metavar="FILE",
                   help="read the token from FILE (else $POLYBUS_TOKEN, else make one)")
    p.add_argument("--ttl", type=seconds, metavar="DURATION",
                   help="drop a worker not heard from for this long (default: three of "
                        "--config's [cluster] heartbeat, as a run's own registry; else 3s)")
    p.add_argument("--config", metavar="FILE",
                   help="use this configuration's [cluster] tls (mutual TLS), token_file, "
                        "heartbeat, registry and listen_host, if it has them")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of --config, as `polybus run --set` does "
                        "(repeatable; only with --config)")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    config_token_file = cluster = None
    if args.set and args.config is None:  # (not dropped unsaid: there is nothing to override)
        raise UsageError(f"--set {args.set[0]}: --set overrides a key of --config, and no "
                         "--config was given")
    if args.config is not None:  # ("": said to be empty, not taken for no --config)
        from polybus.config import load
        from polybus.transport import tls

        # Its peers dial it at [cluster] registry: its certificate must name that host.
        cluster = load(args.config, tuple(args.set), tls_hosts="registry-by-hand").cluster
        tls.configure_cluster(cluster)
        config_token_file = cluster.token_file
    tls_on = cluster is not None and cluster.tls is not None
    # Where to listen: --listen, else the address the configuration's parts will look
    # for it at ([cluster] registry), else its listen_host (as a run's own registry and
    # a worker of the file listen: loopback by default), on a free port.
    given = args.listen or (cluster.registry or f"{cluster.listen_host}:0"
                            if cluster is not None else "127.0.0.1:0")
    listen = given if "://" in given else f"tcp://{given}"
    try:
        scheme = Address.parse(listen).scheme
    except TransportError:  # (it said "bad address 'tcp://8080'", an address not given)
        what = "--listen" if args.listen else "[cluster] registry"
        raise UsageError(f"{what} {given!r}: expected HOST:PORT with a port "
                         "0-65535, e.g. 127.0.0.1:7700 (port 0: any free port)") from None
    if scheme == "inproc":  # (--listen: [cluster] registry is HOST:PORT)
        raise UsageError(f"--listen {given!r}: {ONE_PROCESS}; a registry is dialled from "
                         "other processes: use HOST:PORT")
    # Handlers first: a SIGINT/SIGTERM (or SIGHUP: its terminal closed) from here on ends
    # the wait below, and the finally removes the token file this command made (a file
    # the user named is theirs to keep). (No lock in a handler: stopsignals.py.)
    stop = StopSignals((signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    made: Path | None = None
    try:
        token = cluster_token(args.token_file, config_token_file, required=False)
        if token is None:
            token = make_token()
            made = write_token_file(token)
        # As a run's embedded registry does (engines/base.py): a worker of that
        # configuration beats every [cluster] heartbeat, and is dropped after three
        # missed (a fixed 3 s dropped the healthy workers of a heartbeat of 5 s).
        ttl = args.ttl if args.ttl is not None else (
            3 * cluster.heartbeat if cluster is not None else 3.0)
        with RegistryService(token, listen, ttl=ttl, say=_say) as reg:
            tcp = reg.address.scheme == "tcp"  # (ipc://: a Unix socket, plain)
            # (as --registry takes it: an IPv6 host in brackets, [::1]:7700, not ::1:7700)
            host_port = str(reg.address).removeprefix("tcp://") if tcp else str(reg.address)
            print(f"polybus registry listening on {host_port}", flush=True)
            if tls_on and tcp:  # (said, as nothing else at start would say it)
                print("polybus registry: mutual TLS on every connection ([cluster] tls "
                      f"of {args.config}); the token handshake runs inside it", flush=True)
            if (plain := plain_beyond("polybus registry", reg.address)) is not None:
                _say(plain + ("" if args.config else
                              " (a registry takes it with --config app.toml)"))
            if made is not None:
                print(f"token written to {made} (readable only by you, removed when the "
                      f"registry stops); start workers with --token-file {made}", flush=True)
            sys.stdout.flush()
            stop.wait()
    finally:
        stop.close()
        if made is not None:
            made.unlink(missing_ok=True)
    # Said and exited as `run` and `serve` are ("polybus registry: interrupted", 130;
    # "terminated", 143), everything already stopped and removed.
    from polybus.cli.main import stopped_by

    return stopped_by("registry", stop.signum)
