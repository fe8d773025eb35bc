"""A priority that reads a promise forwarding would send on: said once a binding.

The client computes a call's priority (``define.<name>.priority``) when the call is
made, from its arguments (dispatch.py). An argument it reads that is an unanswered
promise must be waited for there: the call waits at the client for the producer, and
the value comes to the client and goes on from it, not replica to replica, so
forwarding does nothing for it. That cost was silent (a new-user trial's
``priority = "len(x)"``, x a promise); it is said here, once a binding, with what to do
instead. Waiting there is kept: the priority is the configuration's, and its value
needs the argument's.

An argument it reads that is a list, tuple or dict holding such promises (forwarded
too: fwdargs.py) may or may not be waited for: ``len(xs)`` needs no value, ``len(xs[0])``
does. So for it the saying comes after the priority is computed, if the priority waited
for one of them (`note_priority_waited`), in the same once a binding. What it waited
for is what its thread noted as it computed (client/waitwatch.py), not which promises
were answered between a look before and a look after: another thread may take an
answer in meanwhile, for a priority that waited for nothing (a false warning).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

from polybus.client.fwdargs import Probes, promise_inside
from polybus.client.fwdedge import unsent_value
from polybus.client.waitwatch import waits_watched
from polybus.client.wireargs import holds_promise, is_namedtuple

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["note_priority_reads", "note_priority_waited", "priority_of"]

log = logging.getLogger("polybus.client")

_said: weakref.WeakSet[Dispatcher] = weakref.WeakSet()


def priority_of(d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any],
                forwards: bool, probes: Probes | None = None) -> float:
    """The priority of a call of ``d`` (which has one); for a call that forwards, what
    it waits for at the client said (the first time on ``d``). ``probes``: what the
    forwarding look found of the containers (fwdargs.py), not probed again."""
    assert d.priority is not None
    held = note_priority_reads(d, args, kwargs, probes) if forwards else None
    if not held:
        return float(d.priority(args, kwargs))
    with waits_watched() as waited:  # (promises in a container it reads: said if it
        prio = float(d.priority(args, kwargs))  # waited for one)
    note_priority_waited(d, held, waited)
    return prio


def note_priority_reads(d: Dispatcher, args: tuple[Any, ...], kwargs: dict[str, Any],
                        probes: Probes | None = None
                        ) -> list[tuple[str, str, list[Any]]] | None:
    """Say, the first time it happens on binding ``d``, that its priority reads an
    argument that is a promise forwarding would have sent replica to replica. The
    containers it reads that hold such promises, with them, for `note_priority_waited`
    (None if none, or said already)."""
    if d in _said:
        return None
    reads = getattr(d.priority, "reads", None)
    held: list[tuple[str, str, list[Any]]] | None = None
    for name, value in reads(args, kwargs) if reads is not None else ():
        t = type(value)
        if (t is list or t is tuple or t is dict or is_namedtuple(t)) and (
                id(value) in probes if probes is not None and _passed(value, args, kwargs)
                else holds_promise(value)):
            unsent = _unsent_inside(value)
            if unsent:
                held = held or []
                held.append((name, t.__name__, unsent))
        elif unsent_value(value):  # (False for anything but a promise)
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
            return None
    return held


def _passed(value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``value`` is one of the call's arguments itself (probed by forwarding's look),
    not one the binding made (a ``*args`` tuple, a default)."""
    return any(a is value for a in args) or any(v is value for v in kwargs.values())


def _unsent_inside(value: Any) -> list[Any]:
    """The unanswered promises inside ``value`` where forwarding looks (fwdargs.py)."""
    unsent: list[Any] = []

    def note(v: Any) -> bool:  # (each one met: False, so the walk goes to the end)
        if unsent_value(v):
            unsent.append(v)
        return False

    promise_inside(value, note)
    return unsent


def note_priority_waited(d: Dispatcher, held: list[tuple[str, str, list[Any]]],
                         waited: set[int]) -> None:
    """``d``'s priority was computed for a call whose arguments it read hold the
    unanswered promises ``held`` (`note_priority_reads`), its thread noting the ids of
    the promises it waited for, ``waited`` (`waits_watched`): if one of ``held`` is
    among them, its value came to the client, and goes on from there; said the first
    time on ``d``."""
    for name, kind, promises in held:
        if d not in _said and any(id(p) in waited for p in promises):
            _said.add(d)
            log.warning(
                "polybus: warning: %s's priority %r reads %s, which this call passes a %s "
                "holding unanswered promises: the client waited for a value among them to "
                "compute the priority, so what it waited for went through the client, not "
                "replica to replica (forwarding does not apply to it); compute the priority from "
                "what the client has (len(%s) needs no value; a size passed beside them), "
                "or set forward = false on the binding, whose call then returns at once "
                "and is sent, its priority computed, when the values come",
                d.interface, getattr(d.priority, "source", "?"), name, kind, name)
