"""The program uses a forwarded value: it is fetched back from the replica keeping it.

A call answered ``Ref("fwd", ...)`` left its value on its replica (sent on to a next
stage, or kept there for one): the first use of its promise asks that replica for it
(``Fetch``), and its record holds it from then on (calls.py). That replica gone, the
call runs again (idempotent, a replica left: fwdlost.py) and its value is the answer.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from polybus.client.calls import define_key
from polybus.client.fwdlost import may_run_again, rerun
from polybus.errors import RemoteError, WorkerDiedError
from polybus.wire.codec import Ref
from polybus.wire.messages import Fetch, Fetched

if TYPE_CHECKING:
    from polybus.client.calls import CallRecord, ReplicaLink
    from polybus.client.forward import Forwarder

__all__ = ["FETCH_TIMEOUT", "fetch"]

_reqs = itertools.count(1 << 40)  # apart from the session's stats requests
FETCH_TIMEOUT = 300.0


def fetch(rec: CallRecord) -> Any:
    """The value of a forwarded call, fetched from the replica that keeps it."""
    from polybus.client.forward import Forwarder

    f = getattr(rec.dispatcher.comm, "forwarder", None)
    link = rec.link
    iface = rec.dispatcher.interface
    if not isinstance(f, Forwarder):
        raise RemoteError(f"the result of this call to {iface} was forwarded by no forwarder "
                          "of this session", interface=iface,
                          replica=link.name if link is not None else "")
    if f.reactor.closed:  # (its run ended: its connections are closed, client/ended.py)
        from polybus.client.ended import stale

        raise stale(rec)
    if link is None or link.dead:
        return _lost(rec, f, link)
    req = next(_reqs)
    reply = f.reactor.request(link, Fetch(f.pkey(rec), req), req, FETCH_TIMEOUT)
    if reply is None and link.dead:  # (it died meanwhile: run again, or WorkerDiedError)
        return _lost(rec, f, link)
    if not isinstance(reply, Fetched) or not reply.ok:
        why = (reply.value[1] if isinstance(reply, Fetched) and isinstance(reply.value, list)
               and len(reply.value) == 2 else "gone or evicted")  # (wire/undecodable.py)
        raise RemoteError(f"the forwarded result of this call to {iface} could not be "
                          f"fetched from {link.name} ({why})",
                          interface=iface, replica=link.name)
    f.fetched += 1
    keeper = getattr(rec.dispatcher, "keeper", None)
    if keeper is not None:  # (at the client now: let go there)
        keeper.fetched(rec)
    return reply.value


def _lost(rec: CallRecord, f: Forwarder, link: ReplicaLink | None) -> Any:
    """The value's replica is gone: the call's value once it runs again (already, for
    a consumer that needed it: forward.py's `_after_lost`, fwdown.py's `lost`; else now,
    as a lost call does, if it may: fwdlost.py's `may_run_again`), or WorkerDiedError."""
    if not rec.done:
        return f.reactor.wait(rec, rec.dispatcher.timeout)
    if type(rec.value) is Ref and may_run_again(rec):
        rerun(f, rec)
        return f.reactor.wait(rec, rec.dispatcher.timeout)
    raise _gone(rec, f, link)


def _gone(rec: CallRecord, f: Forwarder, link: ReplicaLink | None) -> WorkerDiedError:
    """The value's replica is gone (and the call was not run again, fwdown.py's `lost`):
    kept there (``forward = "keep"``, passed on to no consumer) or forwarded, and why it
    is not run again when that is known."""
    d = rec.dispatcher
    iface, name = d.interface, link.name if link is not None else "?"
    if getattr(d, "keeper", None) is not None and not f.edges.get(rec.id):
        said = (f"the answer of this call to {iface} was kept on its replica ({name}), "
                "which is gone")
    else:
        said = (f"the result of this call to {iface} was forwarded and its replica "
                f"({name}) is gone")
    module = link.module if link is not None else ""
    if not d.idempotent:
        said += (f"; {iface} is not idempotent, so it is not run again "
                 f"({define_key(iface, module, 'idempotent')} = false)")
    elif link is not None and not any(not lk.dead for lk in d.links):
        said += f", and no replica of {module} is left to run it again"
    return WorkerDiedError(said, interface=iface, replica=link.name if link else "")
