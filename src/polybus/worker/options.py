"""How a replica serves: its pool, queue, overflow policy, speed and limits."""

from __future__ import annotations

from dataclasses import dataclass

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
    # No interface orders its calls (``priority``; False when the module's configuration
    # is not known): a lone thread may run the calls waiting in an shm ring one after
    # another as they come (worker/direct.py).
    in_order: bool = True
    # Interfaces that run fewer calls at once than the replica has threads (their own
    # ``pool``, worker/limits.py): each entry, the names that share one limit (an
    # interface and its ``@http`` form) and that limit.
    limits: tuple[tuple[tuple[str, ...], int], ...] = ()
