"""polybus check app.toml: every configuration mistake (a call of a use()d name that the
served function cannot take among them: config/callargs.py), then every module that does
not import, before anything starts.

Each module is imported in a child process of its own (usercode.check_imports), so its
top-level code runs there, as a worker would run it, and never in this process. An
import that takes over 2 s is named while the check waits for it (60 s at most; then
the line it was running is said, as it is when Ctrl-C stops the check then);
``--no-import`` checks the configuration alone.

With ``[cluster] tls`` and ``registry``, the one file serves every host of the cluster,
and each host's certificate must name the host that one is dialled at: the registry's
host (the default), else what ``--host`` says, which a worker's host gives as the address
its workers register (that of their ``--listen``, else of ``listen_host``). Without ``registry``, ``listen_host``.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import sys
from typing import TYPE_CHECKING

from polybus.config import validate
from polybus.errors import ConfigError
from polybus.pinning import check_here

if TYPE_CHECKING:
    from polybus.config.model import AppConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's configuration (TOML, or MIL .cfg/.mil)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a configuration key (repeatable)")
    p.add_argument("--no-import", action="store_true",
                   help="check the configuration only; do not import the modules (each is "
                        "otherwise imported once, in a child process)")
    p.add_argument("--host", action="append", type=_host, metavar="NAME",
                   help="with [cluster] tls and registry: a host name or address other "
                        "processes dial this machine at, which its certificate must name "
                        "(repeatable; default: the registry's host). On a worker's host: "
                        "the address its workers register, that of their --listen "
                        "(else of listen_host). "
                        "Without a registry, listen_host is checked as well")


def _host(text: str) -> str:
    """``--host NAME``: a host name or IP address (``[::1]`` as ``::1``), without a port."""
    name = text.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if ":" in name:
        raise argparse.ArgumentTypeError(f"{text!r}: give the host alone, without :PORT")
    try:
        ok = bool(name) and not name.startswith(".") and bool(name.encode("idna"))
    except UnicodeError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"{text!r} is not a host name or IP address "
                                         "(e.g. node2.example.org or 10.0.0.6)")
    return name


def _missing_engine(app: AppConfig) -> str | None:
    """The problem of an engine whose package is not installed, or None."""
    needs = {"mpi": ("mpi4py", "mpi"), "ray": ("ray", "ray")}.get(app.cluster.engine)
    if needs is None or importlib.util.find_spec(needs[0]) is not None:
        return None
    return (f"{app.origin('cluster.engine')}: cluster.engine: the {app.cluster.engine} "
            f"engine needs {needs[0]}, which is not installed (pip install "
            f"'polybus[{needs[1]}]')")


def _note(line: str) -> None:
    print(f"note: {line}", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    app, errors = validate(args.config, tuple(args.set), tls_hosts=args.host or "registry",
                           running=True)
    missing = _missing_engine(app) if app is not None else None
    if app is not None and not missing:
        try:
            check_here(app)  # (CPUs this machine does not have, where it starts processes)
        except ConfigError as exc:
            errors.append(exc)
    if errors or missing:
        # (an engine whose package is missing is a problem of the configuration as any
        # other: said with them, before any module is imported, and counted the same)
        for e in [*errors, *([missing] if missing else [])]:
            print(f"error: {e}", file=sys.stderr)
        # (found checking it: they may be in its modules' files, or in --set)
        print(f"{len(errors) + bool(missing)} problem(s) found checking "
              f"{args.config or repr(args.config)}", file=sys.stderr)
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
            # (not "do not import": one may have imported and lack what the file names)
            print(f"{len(failed)} problem(s) found importing the modules of {args.config}",
                  file=sys.stderr)
            return 2
    from polybus.config.inclient import in_client_lines

    for line in in_client_lines(app):  # (replication = 0: what it does)
        _note(line)
    servers = ", ".join([*(f"{m.key} x{len(m.replication)}" for m in app.servers()),
                         *(f"{k} x0 (in the client)" for k, m in app.modules.items()
                           if m.in_client and any(b.module == k for b in app.bindings))])
    routes = f"; {len(app.serve.routes)} HTTP route(s)" if app.serve is not None else ""
    ranks = sum(len(m.replication) for m in app.servers()) + 1
    engine = {"mpi": f"; mpi: mpiexec -n {ranks}",
              "ray": f"; ray: {ranks - 1} actor(s) of 1 CPU"}.get(app.cluster.engine, "")
    print(f"{args.config}: ok (client {app.client or 'none'}; servers {servers or 'none'}; "
          f"{len(app.bindings)} binding(s){routes}{engine})")
    return 0
