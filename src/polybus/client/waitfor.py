"""``--wait-for-workers``: a client that may start before its workers (a deployment's
start order, as gRPC's ``wait_for_ready``): each module the program calls is waited for
until as many replicas as its replication asks for are registered, or the run's wait is
over; the run then goes on with those registered (fewer: the usual warning; none: the
usual NoReplicaError, saying how long it waited). A registry that does not answer
(not started yet, or restarted under the wait: the connection held to it is closed) is
waited for too, within the same bound, said once; past it, its error is raised, saying
how long it was waited for. A registry that answers and refuses (the token, or no
polybus registry there, or another TLS setting) fails the run at once."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from polybus.config.units import duration_text
from polybus.deadline import duration_seconds
from polybus.errors import (
    NoReplicaError,
    TLSHandshakeError,
    TransportError,
    UsageError,
)
from polybus.usercode import source_digest

if TYPE_CHECKING:
    from polybus.config.model import AppConfig
    from polybus.registry.client import RegistryClient

__all__ = ["LOOK_S", "await_replicas", "none_registered", "wait_seconds"]

log = logging.getLogger("polybus")
LOOK_S = 0.1  # between two looks at the registry


def await_replicas(registry: RegistryClient, module: str, want: int, until: float,
                   waited_for: float, source: Path | None = None) -> None:
    """Look at ``registry`` until ``want`` replicas of ``module`` are registered or the
    clock (monotonic) reaches ``until``; said once, with what it waits for, if it waits
    at all (``waited_for``: the whole wait, seconds). A replica that runs another file
    than ``source`` (dialing.same_source leaves it out) is not counted: only workers of
    another file registered made the run fail at once, never waiting for the one that
    was being started again from this file."""
    said = gone = False
    try:
        mine = source_digest(source) if source is not None else None
    except OSError:  # (read at the check; gone since: nothing to compare)
        mine = None
    while True:
        try:
            replicas = registry.resolve(module=module)
        except TLSHandshakeError:  # (it answers, in another TLS setting: no wait mends it)
            raise
        except TransportError as exc:
            # Not answering, or its connection closed (a registry restarted under the
            # wait): the next look connects again. (It failed the run at once.)
            if time.monotonic() >= until:
                raise type(exc)(f"{exc} (waited {duration_text(waited_for)} for it: "
                                "--wait-for-workers)") from None
            if not gone:
                gone = True
                log.warning("polybus: the registry at %s does not answer (%s); waiting up "
                            "to %s (--wait-for-workers) for it and module %r",
                            registry.address, exc, duration_text(waited_for), module)
            time.sleep(min(LOOK_S, max(0.0, until - time.monotonic())))
            continue
        other = sum(1 for r in replicas if mine and r.source and r.source != mine)
        found = len(replicas) - other
        if found >= want or time.monotonic() >= until:
            return
        if not said:
            said = True
            besides = (f" ({other} more of another file than {Path(source).name}, not "
                       f"counted)" if other and source is not None else "")
            log.warning("polybus: waiting up to %s (--wait-for-workers) for module %r: "
                        "%d of %d replica(s) registered at %s%s", duration_text(waited_for),
                        module, found, want, registry.address, besides)
        time.sleep(min(LOOK_S, max(0.0, until - time.monotonic())))


def wait_seconds(value: float | str | None, registry: str | None) -> float:
    """``wait_for_workers`` in seconds (0: none), a number or a duration (``"30s"``);
    UsageError for anything else, and without a ``registry`` whose workers are started
    apart (a run's own workers are registered before its program starts)."""
    if value is None:
        return 0.0
    seconds = duration_seconds(value, "--wait-for-workers")
    if not registry:
        raise UsageError("--wait-for-workers waits for workers started apart, at a "
                         "registry: use it with --registry HOST:PORT (or [cluster] "
                         "registry); a run's own workers are ready before its program starts")
    return seconds


def none_registered(registry: RegistryClient, module: str, app: AppConfig,
                    waited: float) -> NoReplicaError:
    """The error of a run none of whose replicas of ``module`` is registered (after
    ``waited`` seconds of --wait-for-workers, 0 for none): what is registered there
    instead, and how to start one."""
    others = sorted({r.module for r in registry.resolve()})
    there = (f"modules registered there: {', '.join(others)}; a worker started "
             f"with --module FILE serves the module named as FILE's stem"
             if others else "nothing is registered there")
    after = f" after {duration_text(waited)}" if waited else ""
    return NoReplicaError(f"no replica of module {module!r} is registered at "
                          f"{registry.address}{after} ({there}). Start one: `polybus "
                          f"worker --registry {registry.address} --config "
                          f"{app.path} --as {module}`"
                          + ("" if app.cluster.token_file else
                             " with this run's token (--token-file FILE, or "
                             "$POLYBUS_TOKEN)"))
