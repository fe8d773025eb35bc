"""Which replica of a binding takes a call: the dispatcher's replicas as its balance
policy (client/policies/balance.py) sees them, alive (`alive`), open to new calls
(`open_to_calls`: alive and not running a suspect alone, client/backlog.py) and loaded
(`loads`), and the pick among them (`pick_any`, and `pick_fresh` for a call the program
makes). Functions of a Dispatcher (client/dispatch.py), as client/backlog.py's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polybus.client.calls import ReplicaLink
from polybus.client.policies.balance import RoundRobin
from polybus.errors import NoReplicaError

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["alive", "loads", "open_to_calls", "pick_any", "pick_fresh"]


def alive(d: Dispatcher) -> list[bool]:
    return [not lk.dead for lk in d.links]


def loads(d: Dispatcher) -> list[int]:
    """Each replica's calls from this client, every interface's (`ReplicaLink.load`)."""
    return [lk.load for lk in d.links]


def open_to_calls(d: Dispatcher) -> list[bool]:
    """Replicas that take new calls: alive and not running a suspect alone."""
    return [not lk.dead and i not in d._isolated for i, lk in enumerate(d.links)]


def pick_any(d: Dispatcher) -> ReplicaLink:
    policy = d.policy
    if isinstance(policy, RoundRobin):  # (a rotation, or the least loaded: no lists made)
        i = policy.pick_open(d.links, d._isolated)
        if i is not None:
            return d.links[i]
    open_ = open_to_calls(d)
    i = d.policy.pick(open_ if any(open_) else alive(d))
    if i is None:
        raise NoReplicaError(f"no live replica serves {d.interface}")
    return d.links[i]


def pick_fresh(d: Dispatcher) -> ReplicaLink:
    """`pick_any` for a call the program makes: under ``balance = "least"``, when
    no replica is free of this client's calls, the answers that have come are read
    first (a program that does not wait reads none, and every replica would look as
    loaded as the calls it was ever sent). Read only: no open batch of another
    binding is closed for it (`poll(batches=False)`, as `Promise.done` looks). Not
    where a loop reads every answer as it comes (`reads_fresh` False: `polybus
    serve`, whose bridge hands answers out only in its own steps)."""
    link = pick_any(d)
    if d._least and link.load and d.reads_fresh:
        d.reactor.poll(False)
        link = pick_any(d)
    return link
