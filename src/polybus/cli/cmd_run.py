"""polybus run app.toml: result on stdout, summary on stderr, --json for the figures."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from functools import partial
from typing import TextIO

from polybus.cli.output import STDOUT_GONE, result_console, stdout_gone
from polybus.cli.values import check_distinct, check_writable, read_files, save, seconds
from polybus.config import module_sources
from polybus.config.origin import SET
from polybus.deadline import check_timeout
from polybus.errors import RemoteError, RemoteException, reported_name
from polybus.runargs import jsonable
from polybus.runner import run
from polybus.summary import caption, has_table, strategies, summary
from polybus.usernames import type_name
from polybus.wherestopped import where_stopped


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's configuration (TOML, or MIL .cfg/.mil)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a configuration key, e.g. modules.server.replication=8")
    p.add_argument("--json", metavar="FILE", help="write result and statistics as JSON (- for standard output)")
    p.add_argument("--registry", metavar="HOST:PORT",
                   help="use the workers of a running registry instead of starting any")
    p.add_argument("--wait-for-workers", type=seconds, metavar="DURATION",
                   help="with --registry: wait up to DURATION for each module's workers "
                        "to register (start order free) instead of failing at once; and, "
                        "if above 5 s, for a lost worker to come back")
    p.add_argument("--token-file", metavar="FILE",
                   help="with --registry: read the cluster token from FILE (else "
                        "$POLYBUS_TOKEN, else the configuration's [cluster] token_file)")
    p.add_argument("--quiet", action="store_true",
                   help="no summary on stderr (what the program prints, client and "
                        "workers, is still shown)")
    p.add_argument("--no-worker-output", action="store_true",
                   help="do not forward what the workers print to stderr")
    p.add_argument("--timeout", type=seconds, metavar="DURATION",
                   help="stop the program once it has run this long (its workers' "
                        "start-up not counted), saying where it was; exit status 124")


def write_json(path: str, doc: dict[str, object], out: TextIO | None = None) -> None:
    """``doc`` to the file ``path``, or for ``-`` to ``out`` (standard output as the
    run found it: what the program prints went to stderr meanwhile). A value strict
    JSON cannot hold is written as `runner.jsonable` writes one (its repr, say) rather
    than raising after the run."""
    try:
        text = json.dumps(doc, indent=2, allow_nan=False)  # (whole, before the file)
    except (TypeError, ValueError):
        text = json.dumps(jsonable(doc), indent=2, allow_nan=False)
    if path == "-":
        to = out or sys.stdout
        to.write(text + "\n")
        to.flush()
        return
    with open(path, "w") as f:
        f.write(text + "\n")


def error_doc(exc: BaseException) -> dict[str, object]:
    """What --json says of a run that ended in ``exc``; a remote exception's own type
    (``server.InputError``), message and replica as fields of their own, for a script."""
    message = str(exc)
    if isinstance(exc, KeyboardInterrupt):  # (no message of its own: where it was)
        message = (message + where_stopped(exc)).lstrip("; ")
    error: dict[str, object] = {"type": reported_name(exc), "message": message}
    if isinstance(exc, RemoteException):
        error.update(remote_type=exc.remote_type, remote_message=exc.remote_message,
                     remote_traceback=exc.remote_traceback, replica=exc.replica,
                     interface=exc.interface)
        if exc.origin:  # (failed upstream: the call that raised it, "load on stage1-1")
            error["origin"] = exc.origin
    if isinstance(exc, RemoteError) and exc.call:  # (which call: ``boom(3)``)
        error["call"] = exc.call
    site = getattr(exc, "call_site", None)  # (callsite.py: the user's line, FILE:LINE)
    if site is not None:
        error["call_site"] = site
    return {"error": error}


def main(args: argparse.Namespace) -> int:
    check_timeout(args.timeout, "--timeout")
    out = sys.stdout
    # (the result, or the error of a run that failed, replaced the file: the
    # configuration, or a module's source, with no word)
    if args.json:
        check_distinct([("--json", args.json)],
                       read_files("the configuration being run", args.config,
                                  module_sources(args.config, tuple(args.set), SET)))
    if args.json != "-":  # (-: standard output, the result then only there)
        check_writable(args.json, "--json")
    try:
        # With --json -, what the program prints goes to stderr: stdout is the JSON's.
        with contextlib.redirect_stdout(sys.stderr) if args.json == "-" else \
                contextlib.nullcontext():
            r = run(args.config, tuple(args.set), registry=args.registry,
                    token_file=args.token_file, origin=SET,
                    worker_output=not args.no_worker_output, timeout=args.timeout,
                    wait_for_workers=args.wait_for_workers)
        unshown = shown(r.result) if args.json != "-" else None
    except BaseException as exc:  # a script reading --json learns why there is no result
        if args.json and not isinstance(exc, SystemExit):  # (not a stale result)
            # (one that cannot be written is a line of its own: the run's error follows;
            # it was replaced by the --json error)
            save("run", "--json", args.json, partial(write_json, doc=error_doc(exc),
                                                     out=out))
        raise
    if unshown:  # (the run's figures stand: the summary and --json follow)
        print(f"polybus run: {unshown}", file=sys.stderr, flush=True)
    if not args.quiet:
        if has_table(r):
            result_console(sys.stderr).print(summary(r))
        print(caption(r), file=sys.stderr)  # one line, however wide (not a table caption)
        for line in strategies(r):  # (what batching, caching, forwarding... did)
            print(line, file=sys.stderr)
    # (checked before the run; a full disk, or its directory removed, shows only now)
    if args.json and not save("run", "--json", args.json,
                              partial(write_json, doc=r.to_json(), out=out)):
        return 2
    sys.stdout.flush()
    return 1 if unshown else 0


def shown(result: object) -> str | None:
    """Print ``result`` on stdout; None, or if its str() (a __repr__ or __str__ of the
    program's) raised, why it could not be shown: a raw traceback at the print lost
    the summary. --json writes such a result as `runargs.jsonable` does."""
    try:
        text = str(result)
    except Exception as exc:
        return (f"the result ({type_name(type(result))}) could not be shown: printing it "
                f"raised {_described(exc)}")
    try:
        print(text, flush=True)
    except BrokenPipeError:  # (`polybus run app.toml | head`: the summary follows)
        if not stdout_gone():
            raise
        return f"the result could not be written: {STDOUT_GONE}"
    return None


def _described(exc: BaseException) -> str:
    """``TYPE: message``, ``TYPE`` alone if its str() raises in turn."""
    try:
        message = str(exc)
    except Exception:
        message = ""
    kind = type_name(type(exc))
    return f"{kind}: {message}" if message else kind
