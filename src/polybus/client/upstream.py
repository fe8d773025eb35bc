"""The error of a call waiting at the client (client/awaiting.py) whose producer failed.

The consumer fails unplaced, with the typed error the forwarding path gives (its
replica's, worker/fwdheld.py and client/fwdblame.py): a RemoteException of the
producer's type, its message said once as "an upstream call failed: ...", and where it
was raised ("f on server-0"; through a chain of stages, "f on server-0, upstream of g").
The producer's own error is then counted as seen (client/unseen.py). A consumer of a
producer that was cancelled fails with a CancelledError naming it (client/cancel.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polybus.client.promise import CallPromise
from polybus.client.unseen import seen
from polybus.errors import UPSTREAM_FAILED, CancelledError, PolybusError, RemoteException

if TYPE_CHECKING:
    from polybus.client.awaiting import Promised
    from polybus.client.calls import CallRecord

__all__ = ["consumer_error", "origin", "ran_at", "upstream_error", "upstream_of"]


def upstream_error(rec: CallRecord, producer: Promised, error: PolybusError) -> PolybusError:
    """The error of consumer ``rec`` whose ``producer`` failed with ``error``, as a
    consumer's replica gives it under forwarding (worker/fwdheld.py, client/fwdblame.py):
    the producer's type, message (said once as an upstream failure) and traceback, and
    where it was raised. The consumer was never placed: no replica of its own."""
    if isinstance(error, CancelledError):  # (its producer was cancelled: client/cancel.py)
        from polybus.client.calls import text_of
        from polybus.client.cancel import cancelled_upstream

        return cancelled_upstream(rec.dispatcher.interface, text_of(rec), error)
    return consumer_error(rec.dispatcher.interface, error, origin(producer, error))


def consumer_error(interface: str, error: PolybusError, where: str) -> RemoteException:
    """The error of a consumer call to ``interface`` whose producer failed with ``error``
    (raised ``where``: `origin`), ``error`` counted as seen (client/done.py's too)."""
    if isinstance(error, RemoteException):
        kind, message, tb = error.remote_type, error.remote_message, error.remote_traceback
    else:
        kind, message, tb = type(error).__name__, str(error), ""
    said = message if message.startswith(UPSTREAM_FAILED) else UPSTREAM_FAILED + message
    seen(error)  # (it reaches the program as the consumer's)
    return RemoteException(kind, said, tb, interface=interface, origin=where)


def origin(p: Promised, error: PolybusError) -> str:
    """Where ``error`` came from: "f on server-0", or, when ``p`` itself failed upstream,
    that failure's origin and then ``p`` ("f on server-0, upstream of g on server-1")."""
    if type(p) is CallPromise:
        link, iface = p._rec.link, p._rec.dispatcher.interface
    else:
        link, iface = p._rec.link, p._rec.batcher.interface
    return upstream_of(error, ran_at(iface, link.name if link is not None else "", error))


def ran_at(iface: str, replica: str, error: object) -> str:
    """Where a producer failed: "f on server-0", or "f" alone when ``error``, the
    client's own verdict, names that replica already (a timeout's "sent to server-0",
    a lost replica's): said once, and not as a replica it failed on."""
    if not replica or (not isinstance(error, RemoteException) and error is not None
                       and replica in str(error)):
        return iface
    return f"{iface} on {replica}"


def upstream_of(error: PolybusError, mine: str) -> str:
    """``mine`` (where a producer ran), after ``error``'s own origin when ``error`` is
    itself an upstream failure ("f on server-0, upstream of g")."""
    if isinstance(error, RemoteException) and error.remote_message.startswith(UPSTREAM_FAILED) \
            and error.origin:
        return f"{error.origin}, upstream of {mine}"
    return mine
