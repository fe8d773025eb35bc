"""polybus check app.toml: every configuration mistake, then every module that does not
import, before anything starts.

Each module is imported in a child process of its own (usercode.check_imports), so its
top-level code runs there, as a worker would run it, and never in this process. An
import that takes over 2 s is named while the check waits for it (60 s at most; then
the line it was running is said); ``--no-import`` checks the configuration alone.
"""

from __future__ import annotations

import argparse
import sys

from polybus.config import validate


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's TOML configuration")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a configuration key (repeatable)")
    p.add_argument("--no-import", action="store_true",
                   help="check the configuration only; do not import the modules (each is "
                        "otherwise imported once, in a child process)")


def _note(line: str) -> None:
    print(f"note: {line}", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    app, errors = validate(args.config, tuple(args.set))
    if errors:
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"{len(errors)} problem(s) in {args.config}", file=sys.stderr)
        return 2
    assert app is not None
    for note in app.notes:
        print(f"warning: {note}", file=sys.stderr)
    if not args.no_import:
        from polybus.usercode import check_imports

        failed = check_imports(app, notice=_note)
        for line in failed:
            print(f"error: {line}", file=sys.stderr)
        if failed:
            print(f"{len(failed)} module(s) of {args.config} do not import", file=sys.stderr)
            return 2
    servers = ", ".join(f"{m.key} x{len(m.replication)}" for m in app.servers())
    routes = f"; {len(app.serve.routes)} HTTP route(s)" if app.serve is not None else ""
    print(f"{args.config}: ok (client {app.client or 'none'}; servers {servers or 'none'}; "
          f"{len(app.bindings)} binding(s){routes})")
    return 0
