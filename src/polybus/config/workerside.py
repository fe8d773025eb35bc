"""Settings a replica applies itself: what an override cannot change in workers started
by hand.

A run that uses a running registry (``--registry``) starts no worker: each replica it
finds was started by ``polybus worker`` with its own settings (``--config`` and its
``--set``, or none with ``--module``). An override given to that run for one of these
reaches no replica, so it is said rather than silently dropped. The rest of a serving
module's settings are the client's to apply (which replicas to call, how, what to cache,
timeouts, retries) and take effect as ever; `transport` is chosen per replica from what
it offers (client/dialing.py says when it cannot be had).
"""

from __future__ import annotations

from typing import Any

from polybus.config.model import AppConfig, ModuleSpec

__all__ = ["REPLICA_DEFINE_KEYS", "worker_side_changes"]

# define.<interface> keys a replica applies: its queue, its pool and its cache's bound.
REPLICA_DEFINE_KEYS = ("priority", "pool", "pool_kind", "queue", "overflow", "cache_bytes")


def _replicas(spec: ModuleSpec) -> list[tuple[Any, ...]]:
    """What of ``replication`` a replica applies (its name, if not the default one, and
    its speed); the count is the client's (it warns when fewer are registered)."""
    return [(None if r.name == f"{spec.key}-{i}" else r.name, r.speed, r.host)
            for i, r in enumerate(spec.replication)]


def worker_side_changes(base: AppConfig, app: AppConfig) -> list[str]:
    """The dotted keys of serving modules' replica-side settings that differ between
    ``base`` (the file alone) and ``app`` (with this run's overrides)."""
    changed: list[str] = []
    for key, spec in app.modules.items():
        old = base.modules.get(key)
        if not spec.replication or old is None:
            continue
        new_reps, old_reps = _replicas(spec), _replicas(old)
        n = min(len(new_reps), len(old_reps))
        if new_reps[:n] != old_reps[:n] or any(r != (None, 1.0, None)
                                                for r in new_reps[n:]):
            changed.append(f"modules.{key}.replication")
        for name, d in spec.define.items():
            if d.filled:  # (what it takes from the named defines: theirs, said of them)
                continue
            before = old.define.get(name)
            for field in REPLICA_DEFINE_KEYS:
                if before is None or getattr(d, field) != getattr(before, field):
                    if before is None and getattr(d, field) == getattr(type(d)(), field):
                        continue
                    changed.append(f"modules.{key}.define.{name}.{field}")
    return changed
