"""How a replica serves: its pool, queue, overflow policy, speed and limits."""

from __future__ import annotations

from dataclasses import dataclass

from polybus.plural import plural
from polybus.transport.spinning import SPIN_S


@dataclass
class ServeOptions:
    pool: int = 1
    queue: int = 1000
    overflow: str = "block"         # or "reject"
    speed: float = 1.0              # 0 < speed <= 1: calls last real time / speed
    allow_pickle: bool = False
    max_frame: int = 1 << 30
    handshake_timeout: float = 5.0  # a peer silent this long before proving itself is dropped
    cache_bytes: int = 512 * 1024 * 1024  # operand cache (worker/cache.py)
    spin_s: float = SPIN_S          # after answering, look this long before sleeping
    # [cluster] heartbeat: a TCP client cut off by the network is dropped within
    # transport/keepalive.py's bound_s of it (worker/accepting.py).
    heartbeat: float = 1.0
    # No interface orders its calls (``priority``; False when the module's configuration
    # is not known): a lone thread may run the calls waiting in an shm ring one after
    # another as they come (worker/direct.py).
    in_order: bool = True
    # Interfaces that run fewer calls at once than the replica has threads (their own
    # ``pool``, worker/limits.py): each entry, the names that share one limit (an
    # interface and its ``@http`` form) and that limit.
    limits: tuple[tuple[tuple[str, ...], int], ...] = ()
    # The defines written (not filled in: config/model.py) that ask for the queue's bound
    # and for overflow = "reject", named when a call of another interface is refused.
    queue_from: tuple[str, ...] = ()
    reject_from: tuple[str, ...] = ()

    def full_text(self, name: str, iface: str) -> str:
        """A BusyError's message: the queue of replica ``name`` is full, and for a call
        of an interface that did not ask for "reject", which defines made it so."""
        text = f"{name}: queue of {plural(self.queue, 'call')} is full"
        if not self.reject_from or iface.partition("@")[0] in self.reject_from:  # (f@http: f)
            return text
        bound, rejects = _defines(self.queue_from), _defines(self.reject_from)
        said = (f"its bound (queue = {self.queue}) and overflow = \"reject\" from {rejects}"
                if bound == rejects else f"its bound (queue = {self.queue}) from {bound} and "
                f"overflow = \"reject\" from {rejects}")
        return (f"{text}; the replica has one queue for all its interfaces, and a call of "
                f"{iface} is refused too: the queue takes {said}")


def _defines(names: tuple[str, ...]) -> str:
    """``define.a and define.b``, ``define.a, define.b and 2 more``."""
    shown = [f"define.{n}" for n in names]
    if not shown:
        return "the default"
    head, tail = (shown[:2], f"{len(shown) - 2} more") if len(shown) > 3 else (shown[:-1],
                                                                                shown[-1])
    return f"{', '.join(head)} and {tail}" if head else tail
