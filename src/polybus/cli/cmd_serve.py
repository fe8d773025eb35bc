"""polybus serve app.toml: start the program's cluster and answer HTTP through its routes."""

from __future__ import annotations

import argparse
import signal

from polybus.cli.values import seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's TOML configuration (with [serve])")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="where the HTTP server listens (default: serve.listen, "
                        "127.0.0.1:8080); port 0 picks a free one")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a configuration key, e.g. modules.web.define.page.pool=8")
    p.add_argument("--registry", metavar="HOST:PORT",
                   help="use the workers of a running registry instead of starting any")
    p.add_argument("--token-file", metavar="FILE",
                   help="with --registry: read the cluster token from FILE (else "
                        "$POLYBUS_TOKEN, else the configuration's [cluster] token_file)")
    p.add_argument("--no-worker-output", action="store_true",
                   help="do not forward what the workers print to stderr")
    # For a program that starts the front door itself (the rudy benchmark): it then ends
    # with that program, as the engine's workers do, even if the program is killed.
    p.add_argument("--wait-for-workers", type=seconds, metavar="DURATION",
                   help="with --registry: wait up to DURATION for each module's workers "
                        "to register (start order free) instead of failing at once")
    p.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> int:
    from polybus.config.origin import SET
    from polybus.http.frontdoor import serve

    if args.exit_with_parent:
        from polybus.worker.lifetime import die_with_parent

        die_with_parent()
    stopped_by = serve(args.config, tuple(args.set), listen=args.listen,
                       registry=args.registry, token_file=args.token_file, origin=SET,
                       worker_output=not args.no_worker_output,
                       wait_for_workers=args.wait_for_workers)
    # Stopped by a signal, everything already stopped: said and exited as `run` is
    # (cli/main.py: "polybus serve: interrupted", 130; "terminated", 143).
    if stopped_by == signal.SIGTERM:
        from polybus.cli.main import Terminated

        raise Terminated
    if stopped_by == signal.SIGINT:
        raise KeyboardInterrupt
    return 0
