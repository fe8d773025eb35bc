"""`polybus serve`: the program's cluster, and an HTTP server calling its routes.

The cluster starts as for `polybus run` (runner.started_cluster); the front door is
then the program's client: one session whose bound names are the route keys, driven
from an asyncio loop (http/calls.py). SIGINT and SIGTERM stop the server (no new
connection; requests in flight get ``serve.grace`` to finish, or a second signal, then
are answered 503), close the session and stop every process the engine started; the
command then exits 130 or 143 (cli/cmd_serve.py), as `run` does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import signal
import socket
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from polybus.client.session import Session
from polybus.client.waitfor import wait_seconds
from polybus.config import load
from polybus.config.cluster import check_registry_option
from polybus.config.model import AppConfig, Binding, CallStyle, ServeSpec
from polybus.config.origin import PYTHON, Origin
from polybus.config.overrides import toml_value
from polybus.config.table import is_address
from polybus.config.units import duration_text
from polybus.engines.base import Cluster
from polybus.errors import ConfigError, ConfigWarning, UsageError
from polybus.http.calls import CallBridge
from polybus.http.hangup import listen
from polybus.http.response import HTTP_SUFFIX
from polybus.http.server import FrontDoor
from polybus.pinning import check_here
from polybus.plural import plural
from polybus.runargs import echo_to, override_strings
from polybus.runner import serving_rank, started_cluster
from polybus.token import check_token_apart
from polybus.transport.reach import is_loopback

__all__ = ["serve"]


def _bindings(app: AppConfig, spec: ServeSpec) -> list[tuple[Binding, Any]]:
    out = []
    for r in spec.routes:
        # "sync" is served one call at a time by the front door (server.py), never by
        # blocking the loop; promises are never arguments here, so nothing to forward.
        style = r.use.callstyle if r.use.callstyle.kind != "sync" else CallStyle("async")
        use = dataclasses.replace(r.use, callstyle=style, forward=False)
        out.append((Binding("serve", r.key, r.module, r.interface + HTTP_SUFFIX), use))
    return out


def _timeouts(app: AppConfig, spec: ServeSpec) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for r in spec.routes:
        define = app.modules[r.module].define.get(r.interface)
        out[r.key] = r.use.timeout or (define.timeout if define else None)
    return out


def _listen(address: str) -> socket.socket:
    """The front door's listening socket, made before anything starts, so that a port
    in use is one clear error and no cluster is started for nothing."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        return socket.create_server((host, int(port)), backlog=1024,
                                    family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as e:
        hint = ""
        if e.errno == errno.EADDRINUSE:  # (another server, or a serve still running)
            hint = (f"; another process listens there: stop it, or give another port "
                    f"(--listen {host or '127.0.0.1'}:0 takes a free one, and serve prints it)")
        raise UsageError(f"cannot listen on {address}: {e.strerror or e}{hint}") from None


def serve(path: str | Path, overrides: Mapping[str, Any] | Sequence[str] = (), *,
          listen: str | None = None, registry: str | None = None,
          token_file: str | None = None,
          ready: Callable[[str], None] | None = None, origin: Origin = PYTHON,
          worker_output: bool | TextIO | None = True,
          wait_for_workers: float | str | None = None) -> int | None:
    """Serve the ``[serve]`` routes of ``path`` until SIGINT/SIGTERM; the number of the
    signal that stopped it (its requests in flight given ``serve.grace`` to finish, the
    cluster stopped), None if none did (an mpi rank that served a replica).

    ``listen`` (HOST:PORT) overrides ``serve.listen``; ``ready`` is called with the
    server's URL once it accepts connections. ``overrides`` as for `polybus.run`.
    ``worker_output``: what the workers started here print is forwarded as by
    `polybus.run` (to sys.stderr, or that stream; False or None: not forwarded).
    ``wait_for_workers``: as for `polybus.run` (with a ``registry``).
    """
    check_registry_option(registry)  # (as [cluster] registry is checked)
    echo = echo_to(worker_output)  # (a mistake in it said before anything starts)
    sets = override_strings(overrides)
    if listen is not None:
        if not is_address(listen, lowest_port=0):  # (said as --listen's, not as a --set)
            raise UsageError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080 "
                             "(port 0: any free port)")
        sets = (*sets, f"serve.listen={toml_value(listen)}")
    app = load(path, sets, origin, running=not registry,
               tls_hosts="client" if registry else None)  # (as `polybus.run` loads it)
    wait_s = wait_seconds(wait_for_workers, registry or app.cluster.registry)
    check_token_apart(token_file, registry or app.cluster.registry, python=not origin.shell)
    for note in app.notes:  # (as `polybus.run` says them)
        warnings.warn(str(note), ConfigWarning, stacklevel=2)
    if app.serve is None:
        raise ConfigError("no [serve] table: nothing to serve over HTTP", file=str(path),
                          key="serve", hint='add [serve] with listen = "127.0.0.1:8080" and '
                                            '[serve.routes] such as "GET /" = "web.page"')
    spec = app.serve
    check_here(app, registry=bool(registry))  # (the CPUs of the replicas started here)
    # (an mpi rank that serves a replica goes from started_cluster to its end, never
    # here: the front door's port is rank 0's alone)
    sock = None if serving_rank(app) else _listen(spec.listen)
    try:
        with started_cluster(app, sets, registry=registry, token_file=token_file,
                             worker_output=echo,
                             origin=origin,
                             restart=sys.stderr if spec.restart else None) as cluster:
            assert sock is not None
            # (no pump: the loop steps the reactor when a replica's socket is readable)
            session = Session(app, cluster.registry, cluster.token, _bindings(app, spec),
                              pump=False, how_ended=cluster.how_ended,
                              how_ended_later=cluster.how_ended_later, turn=cluster.shared,
                              wait_s=wait_s)
            try:
                return asyncio.run(_main(app, spec, session, sock, ready,
                                         cluster.halt_restarts, _stays(app, cluster),
                                         cluster.registrations))
            finally:
                session.close()
    finally:
        if sock is not None:
            sock.close()


def _stays(app: AppConfig, cluster: Cluster) -> str | None:
    """Why a worker the engine started is not started again once it ended, said in the
    502s of its route; None if it is, or if the engine cannot say how its workers end
    (workers of a registry: others started them, and may start them again)."""
    if cluster.halt_restarts is not None or (cluster.how_ended is None
                                             and cluster.how_ended_later is None):
        return None
    if app.serve is not None and not app.serve.restart:
        return "[serve] restart = false"
    return f"the {app.cluster.engine} engine starts none again"


async def _main(app: AppConfig, spec: ServeSpec, session: Session, sock: socket.socket,
                ready: Callable[[str], None] | None,
                halt_restarts: Callable[[], None] | None = None,
                stays: str | None = None,
                registrations: Callable[[Callable[[str], None] | None], None] | None = None
                ) -> int | None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    came: list[int] = []  # the signals that came, in order

    bridge = CallBridge(session, loop, stays)

    def registered(module: str) -> None:  # (on the registry's thread: http/revival.py)
        try:
            loop.call_soon_threadsafe(bridge.revival.registered, module)
        except RuntimeError:  # (the loop is closed: serve is stopping)
            pass

    if registrations is not None:
        registrations(registered)

    def signalled(sig: int) -> None:
        came.append(sig)
        if halt_restarts is not None:  # stopping: a worker that ends now stays ended
            halt_restarts()  # (and what waits for a lost one fails now: revival.py)
            bridge.revival.halt("serve is stopping")
        stop.set()

    # Put back after the loop what was there (SIGTERM raises Terminated, cli/main.py):
    # asyncio's removal leaves the default action, and a second SIGTERM while the engine
    # stopped its workers ended serve outright, leaving their logs behind.
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        loop.add_signal_handler(sig, signalled, sig)
    door = FrontDoor(spec, bridge, _timeouts(app, spec))
    server = await listen(sock, door.connection, limit=spec.max_head + (1 << 16))
    try:
        host, port = sock.getsockname()[:2]
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        routes = ", ".join(f"{r.key} -> {r.module}.{r.interface}" for r in spec.routes)
        print(f"polybus serve: listening on {url} ({routes})", file=sys.stderr, flush=True)
        if not is_loopback(host):  # (its own choice, and not one to make unawares)
            print(f"polybus serve: warning: the front door at {url} is reachable beyond "
                  f"this host, with no authentication or TLS of its own: whoever reaches "
                  f"it may call its routes (serve other hosts behind a proxy that "
                  f"terminates TLS and authenticates; docs/security.md, \"Known limits\")",
                  file=sys.stderr, flush=True)
        if ready is not None:
            ready(url)
        await stop.wait()
        server.close()  # (no new connection; those open are the door's to end)
        stop.clear()
        busy = door.in_flight()
        print(f"polybus serve: stopping after {plural(door.requests, 'request')}"
              + (f"; {busy} in flight get {duration_text(spec.grace)} to finish"
                 if busy else ""), file=sys.stderr, flush=True)
        await door.stop(spec.grace, stop)  # (a second signal ends the grace)
    finally:
        if registrations is not None:
            registrations(None)
        server.close()
        bridge.close()
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            if handler is not None:
                signal.signal(sig, handler)
    return came[0] if came else None
