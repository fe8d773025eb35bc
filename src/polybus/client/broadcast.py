"""`broadcast`: one value sent once to every replica, and a handle (operands.Shared) to
pass in its place, which travels as a short Ref (the Comm, client/operands.py, names it).

An array or bytes is named by its bytes (client/naming.py); any other value the codec
can send by its encoding (client/broadcastvalue.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from polybus.client.broadcastvalue import encoded
from polybus.client.held import held_bytes
from polybus.client.naming import content_key, known_for
from polybus.client.operands import Comm, Shared, copy_of
from polybus.client.promise import Promise, wait
from polybus.client.pump import enter, leave
from polybus.client.snapshot import frozen
from polybus.errors import UsageError
from polybus.wire.messages import Put

if TYPE_CHECKING:
    from polybus.client.session import Session

__all__ = ["broadcast"]


def broadcast(value: Any) -> Shared:
    """Send ``value`` once to every replica of every module this client is bound to, and
    return a handle to pass in its place, as an argument or inside a list, tuple or dict
    argument (it travels as a short Ref). ``value`` is an array, bytes, or any value the
    codec can send (a dict, a list, a str, arrays inside them, a dataclass), which the
    replicas get as a call's argument arrives; the handle stands for it as it is now,
    whatever the program changes in it afterwards.

    It costs the value's size times the replicas of all those modules, whether or not
    their interfaces ever receive the handle: a 4 MB array, with one module of 1 replica
    that uses it and another of 2 that never does, sends 12 MB. For the replicas of one
    interface only, configure it instead: ``define.f = { cache = ["table"], prefetch =
    "all" }`` puts the array (passed itself, not a handle) on every replica of ``f``'s
    module the first time a call of ``f`` passes it, and on no other
    (docs/tuning.md, "One value every replica needs")."""
    from polybus.client.stubs import current

    session = current("polybus.broadcast() was called", "polybus.broadcast()")
    if isinstance(value, Promise):  # (content_key looks at the value's type)
        value = value.__polybus_value__()
    if type(value) is Shared:  # (broadcast already)
        return value
    if not isinstance(value, np.ndarray | bytes | bytearray):
        value = wait(value)  # (its promises answered here, not while encoding it below)
    enter(session.gate)  # (the pump writes on these links too: client/pump.py)
    try:
        return _broadcast(session, value)
    finally:
        leave(session.gate)


def _broadcast(session: Session, value: Any) -> Shared:
    if isinstance(value, np.ndarray) and value.dtype.hasobject:
        where = "" if value.dtype == object else f" in its fields, {value.dtype}"
        raise UsageError(
            f"broadcast() cannot take an array of Python objects (dtype=object{where}): "
            "its bytes are references, not content the replicas could keep under a "
            "name; pass it as an argument instead (it goes by value, with pickle = true "
            "on the serving module), or convert it to a numeric dtype")
    key = content_key(value)
    if key is None:  # (a dict, a list, ...: named by its encoding, kept as encoded)
        key, value = encoded(session, value)
    # The handle stands for the bytes as they are now (docs/tuning.md, broadcast): an array that could
    # change is kept as a read-only copy (shared with any held call of that content).
    # Sent again from the array, a replica that lost the content (evicted, or dropped
    # when the array changed and was broadcast again) would get the new bytes under the
    # old name. The copy keeps the name live, so the replicas drop the content only
    # once the handle (and every array of that content) is gone.
    if type(value) is bytearray:
        value = bytes(value)
    elif isinstance(value, np.ndarray) and not frozen(value):
        value = copy_of(value, key)
    known = known_for(session)
    for links in session.links.values():
        for link in links:
            k = known.of(link)
            if key not in k and not link.dead:
                k.add(key, held_bytes(value))
                try:
                    session.reactor.send(link, Put(key, value))
                except BaseException:  # (not written: not held there)
                    k.discard(key)
                    raise
                session.broadcasts.puts += 1  # (the run's report: client/counts.py)
    session.broadcasts.values += 1
    for name, d in session.dispatchers.items():
        if d.comm is None:  # handles travel as Refs on every interface from now on
            d.comm = Comm(d, session.reactor, known)
            # (the sync hot path has no Comm in it; a wrapped entry's: client/rejoin.py)
            rejoin = session.rejoin
            if rejoin is not None and rejoin.swap(name, d.call_sync, d):
                continue
            if session.entries.get(name) == d.call_sync:
                session.entries[name] = d
    return Shared(key, value)
