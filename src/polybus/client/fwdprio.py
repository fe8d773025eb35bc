"""A priority that reads a promise forwarding would send on: said once a binding.

The client computes a call's priority (``define.<name>.priority``) when the call is
made, from its arguments (dispatch.py). An argument it reads that is an unanswered
promise must be waited for there: the call waits at the client for the producer, and
the value comes to the client and goes on from it, not replica to replica, so
forwarding does nothing for it. That cost was silent (a new-user trial's
``priority = "len(x)"``, x a promise); it is said here, once a binding, with what to do
instead. Waiting there is kept: the priority is the configuration's, and its value
needs the argument's.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from polybus.client.fwdedge import unsent_value

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["note_priority_reads"]

log = logging.getLogger("polybus.client")

_said: weakref.WeakSet[Dispatcher] = weakref.WeakSet()


def note_priority_reads(d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Say, the first time it happens on binding ``d``, that its priority reads an
    argument that is a promise forwarding would have sent replica to replica."""
    if d in _said:
        return
    reads = getattr(d.priority, "reads", None)
    for name, value in reads(args, kwargs) if reads is not None else ():
        if unsent_value(value):  # (False for anything but a promise)
            _said.add(d)
            log.warning(
                "polybus: warning: %s's priority %r reads %s, which this call passes an "
                "unanswered promise: the client needs its value to compute the priority, "
                "so the call waits for it here, and the value goes through the client, "
                "not replica to replica (forwarding does not apply); compute the priority "
                "from an argument the client has (a size passed beside the promise), or "
                "set forward = false on the binding, whose call then returns at once and "
                "is sent, its priority computed, when the value comes",
                d.interface, getattr(d.priority, "source", "?"), name)
            return
