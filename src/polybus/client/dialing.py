"""Dialling a module's replicas: which address of each, and all of them at once.

A replica registers its main (TCP) address and the others it listens on (its module's
transport: ipc or shm, on its own host). The client dials the one of its binding's
transport when offered, and falls back to the main address when that one cannot be
dialled from here; it dials every replica of a module at once, so replicas that do not
answer cost one handshake timeout, not one each in turn.

Before that, `same_source` leaves out a replica whose module file is not the
configuration's (its registered `source_digest` differs): a worker of another program's
`server.py` started with --module registers under the same module key, and served every
third call with its own function, silently wrong where the interfaces matched.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, MutableSet, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from polybus.config.origin import written_by
from polybus.errors import NoReplicaError, TransportError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import WILDCARDS, Address, connect
from polybus.transport.reach import is_loopback
from polybus.transport.shm import ShmChannel
from polybus.usercode import source_digest
from polybus.wire.codec import Codec
from polybus.wire.messages import Replica

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.config.model import AppConfig, Binding, ModuleSpec

__all__ = ["check_serves", "connect_all", "connect_replica", "pick_address", "same_source", "say_tcp_only",
           "tune", "unreached_line", "without_scheme"]

log = logging.getLogger("polybus.client")


def pick_address(replica: Replica, scheme: str) -> str:
    """The replica's address of ``scheme`` if it listens on one, else its main address
    (a replica on another host, or started by hand, may offer only tcp)."""
    for address in replica.addresses:
        if address.startswith(f"{scheme}://"):
            return address
    return replica.address


def without_scheme(replicas: Sequence[Replica], scheme: str) -> list[str]:
    """The replicas on this host (a loopback main address) that offer no ``scheme``
    address (ipc or shm), by name: started by hand with ``--module`` or ``--listen``,
    they are reached by TCP, which the client says rather than do silently."""
    if scheme == "tcp":
        return []

    def here(address: str) -> bool:
        try:
            host = Address.parse(address).host
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    return [r.name for r in replicas if here(r.address)
            and not any(a.startswith(f"{scheme}://") for a in r.addresses)]


def unreached_line(replica: Replica, scheme: str, error: object, registry: str) -> str:
    """How a replica registered at ``registry`` that could not be dialled is said: its
    name, address and the error, and, for an address only its own host can dial (its
    loopback, or a wildcard) registered with a registry dialled beyond this host, why
    and what to start it with: a worker started by hand listens on loopback unless
    ``--listen`` says otherwise."""
    where = pick_address(replica, scheme)
    said = f"{replica.name} at {where}: {error}"
    try:
        host = Address.parse(where).host if where.startswith("tcp://") else None
        beyond = not is_loopback(Address.parse(registry).host)
    except TransportError:
        return said
    if host is not None and beyond and (host in WILDCARDS or is_loopback(host)):
        said += (" (an address only its own host can dial: a worker started by hand "
                 "listens on loopback unless told otherwise; start it with --listen "
                 "tcp://ADDRESS:0, an address of its host that this one can reach)")
    return said


def same_source(module: str, source: Path, registry: str, replicas: list[Replica],
                said: MutableSet[str]) -> list[Replica]:
    """``replicas`` without those running another file than ``source`` (a digest that
    differs; none said is taken as the same), each said once a session (``said``); a
    NoReplicaError when that leaves none."""
    try:
        mine = source_digest(source)
    except OSError:  # (read at the check; gone since: nothing to compare)
        return replicas
    others = [r for r in replicas if r.source and r.source != mine]
    if not others:
        return replicas
    names = ", ".join(r.name for r in others)
    if len(others) == len(replicas):
        raise NoReplicaError(
            f"every replica of module {module!r} registered at {registry} ({names}) runs "
            f"another file than {source}: another program's module registered under the "
            f"same key, or workers started before {source.name} was changed; restart them "
            f"from this file, or give this program a registry of its own")
    if f"{module} source" not in said:
        said.add(f"{module} source")
        # (how many the run uses is the session's to say, once it has chosen: a count
        # here said "running with 2 of the 3 registered" before a warning that found 2)
        log.warning("polybus: warning: module %r: left out %s, registered at %s under the "
                    "same key but running another file than %s (another program's, or "
                    "this one before a change)", module, names, registry, source)
    return [r for r in replicas if r not in others]


def say_tcp_only(module: str, scheme: str, replicas: Sequence[Replica],
                 said: MutableSet[str], app: AppConfig | None = None) -> None:
    """Warn, once a session (``said``), when `without_scheme` names any, with what makes
    a worker started by hand listen on tcp alone: ``--module`` or ``--listen``, or a
    configuration of another transport than this run's, as it is when ``app``'s
    overrides (``--set``) gave the module its transport: a worker does not see a run's
    overrides. (It named --module and --listen alone, for workers started with
    ``--config`` whose transport was tcp.)"""
    tcp_only = without_scheme(replicas, scheme)
    if not tcp_only or f"{module}@{scheme} tcp" in said:
        return
    said.add(f"{module}@{scheme} tcp")
    set_by = (app.overrides_label if app is not None and module in app.modules
              and scheme == app.modules[module].transport  # (a binding's own: not said)
              and written_by(app.overridden, f"modules.{module}.transport") else None)
    one = len(tcp_only) == 1
    it = "it" if one else "they"
    if set_by is not None:
        why = (f"this run's {scheme} is from {set_by}, which reaches no worker started by "
               f"hand: one started with `--config FILE --as {module}` listens on FILE's "
               f"transport (give {'it' if one else 'them'} the same {set_by} to listen "
               f"on {scheme} too), and one started with --module or --listen on tcp alone")
    else:
        why = (f"{it} {'was' if one else 'were'} started with a configuration whose "
               f"transport for {module!r} is not {scheme}, or with --module or --listen "
               f"(`polybus worker --config FILE --as {module}` listens on the transport "
               f"FILE gives)")
    log.warning("polybus: warning: module %r is configured for %s, but %s on this host "
                "offer%s only tcp: %s; %s %s reached by tcp", module, scheme,
                ", ".join(tcp_only), "s" if one else "", why, it, "is" if one else "are")


def connect_replica(replica: Replica, scheme: str, token: bytes, codec: Codec) -> Channel:
    """A channel to ``replica`` over ``scheme`` if it offers it, else its main address;
    and its main address if the ``scheme`` one cannot be dialled from here (an ipc or
    shm path of a replica on another host, started by hand: it listens on its module's
    transport beside TCP)."""
    where = pick_address(replica, scheme)
    try:
        return connect(where, token, codec)
    except TransportError as first:
        if where == replica.address:
            raise
        said = first
    try:
        return connect(replica.address, token, codec)
    except TransportError as exc:
        raise TransportError(f"{said}; and at {replica.address}: {exc}") from None


def connect_all(replicas: Sequence[Replica], scheme: str, token: bytes,
                 codecs: Sequence[Codec]) -> list[Channel | TransportError]:
    """`connect_replica` to every replica at once (a channel, or why it could not be had, each
    in order): one that does not answer costs its handshake's timeout once, not once
    per such replica in turn. Any other error (an interrupt too) closes the channels
    made and is raised."""
    made: list[Channel] = []

    def one(i: int) -> Channel | Exception:
        try:
            ch = connect_replica(replicas[i], scheme, token, codecs[i])
        except Exception as exc:  # (handed back: sorted out below)
            return exc
        made.append(ch)
        return ch

    try:
        if len(replicas) < 2:
            outcomes = [one(i) for i in range(len(replicas))]
        else:
            with ThreadPoolExecutor(max_workers=min(16, len(replicas)),
                                    thread_name_prefix="polybus-connect") as pool:
                outcomes = list(pool.map(one, range(len(replicas))))
        for o in outcomes:
            if isinstance(o, Exception) and not isinstance(o, TransportError):
                raise o
    except BaseException:
        for ch in made:
            ch.close()
        raise
    return outcomes  # type: ignore[return-value]  # (Channels and TransportErrors now)


def check_serves(b: Binding, links: Sequence[ReplicaLink], serves: Mapping[str, list[str]],
                 registry: str, config: Path) -> None:
    """Every replica found must serve the bound interface (``serves``: replica name ->
    the interfaces it registered): one registered under the module's key from another
    file (two programs' `server.py` started by hand with --module) would fail only the
    calls sent to it, at random."""
    for link in links:
        served = serves.get(link.name)
        if served is None or b.interface in served:
            continue
        base, http, _ = b.interface.partition("@")
        if http and base in served:  # (the HTTP form is made from [serve])
            raise NoReplicaError(
                f"replica {link.name} serves {base!r} but not its HTTP form: start "
                f"the workers of a served program with `polybus worker --config "
                f"{config} --as {b.module}`, not --module")
        # (one of another file is left out before, by its digest: `same_source`)
        raise NoReplicaError(
            f"replica {link.name} of module {b.module!r} (registered at "
            f"{registry}) does not serve {b.interface!r}; it serves "
            f"{', '.join(served) or 'nothing'}: a worker started with --module serves "
            f"the functions its file defines (each def, not a function it imports), and "
            f"one started with another configuration what that one binds; start it with "
            f"`polybus worker --config {config} --as {b.module}`, which serves what this "
            f"configuration binds, or give this program a registry of its own")


def tune(channel: Channel, spec: ModuleSpec) -> None:
    """Set a new connection to a replica of ``spec`` up as the module asks."""
    channel.spin_s = spec.spin  # waits for its answers poll first (spinning.py)
    if spec.coalesce and type(channel) is ShmChannel:
        # Bells held back (worker/bells.py): the client sleeps, not spins (a spinning
        # client stays runnable, and takes the CPU from a replica).
        channel.coalesce(spec.coalesce)
        channel.spin_s = 0.0
