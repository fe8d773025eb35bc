"""polybus check app.toml: every configuration mistake, before anything starts."""

from __future__ import annotations

import argparse
import sys

from polybus.config import validate


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's TOML configuration")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a configuration key (repeatable)")


def main(args: argparse.Namespace) -> int:
    app, errors = validate(args.config, tuple(args.set))
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"{len(errors)} problem(s) in {args.config}", file=sys.stderr)
        return 2
    assert app is not None
    servers = ", ".join(f"{m.key} x{len(m.replication)}" for m in app.servers())
    routes = f"; {len(app.serve.routes)} HTTP route(s)" if app.serve is not None else ""
    print(f"{args.config}: ok (client {app.client or 'none'}; servers {servers or 'none'}; "
          f"{len(app.bindings)} binding(s){routes})")
    return 0
