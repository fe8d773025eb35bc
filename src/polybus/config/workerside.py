"""Settings a replica applies itself: what an override cannot change in workers started
by hand.

A run that uses a running registry (``--registry``) starts no worker: each replica it
finds was started by ``polybus worker`` with its own settings (``--config`` and its
``--set``, or none with ``--module``). An override given to that run for one of these
reaches no replica, so it is said rather than silently dropped. Of ``replication``, that
is a replica's speed alone (a worker takes the one its configuration gives its
``--name``): the names and the count are the client's, and choose which of the
registered replicas the run uses (client/choosing.py). The rest of a serving module's
settings are the client's to apply too (how to call, what to cache, timeouts, retries)
and take effect as ever; `transport` is chosen per replica from what it offers
(client/dialing.py says when it cannot be had).
"""

from __future__ import annotations

from polybus.config.model import AppConfig, ModuleSpec

__all__ = ["REPLICA_DEFINE_KEYS", "unapplied", "worker_side_changes"]

# define.<interface> keys a replica applies: its queue, its pool and its cache's bound
# (and of the module itself, its ``cpus``).
REPLICA_DEFINE_KEYS = ("priority", "pool", "pool_kind", "queue", "overflow", "cache_bytes")


def _speeds(spec: ModuleSpec) -> dict[str, float]:
    """What of ``replication`` a replica applies: the speed of each replica, by name (a
    worker under a name its configuration does not give serves at full speed)."""
    return {r.name: r.speed for r in spec.replication}


def worker_side_changes(base: AppConfig, app: AppConfig) -> list[str]:
    """The dotted keys of serving modules' replica-side settings that differ between
    ``base`` (the file alone) and ``app`` (with this run's overrides)."""
    changed: list[str] = []
    for key, spec in app.modules.items():
        old = base.modules.get(key)
        if not spec.replication or old is None:
            continue
        speeds = _speeds(old)
        if any(speed != speeds.get(name, 1.0) for name, speed in _speeds(spec).items()):
            changed.append(f"modules.{key}.replication")
        if spec.cpus != old.cpus:  # (each replica pins itself: worker/main.py)
            changed.append(f"modules.{key}.cpus")
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


def unapplied(label: str, key: str) -> str:
    """What a run with workers started by hand says of ``key``, a `worker_side_changes`
    key its overrides (``label``: ``--set``) changed. Of ``replication``, the speed
    alone: its names and count are the run's (it said they did not reach the workers,
    of the very --set that picked the replica the run used)."""
    if key.endswith(".replication"):
        return (f"{label} changes a replica's speed, which a worker takes from the "
                f"configuration it was started with, and this run uses workers started by "
                f"hand (a running registry): the speed does not reach them (the replicas' "
                f"names and count do: they choose which of those registered this run uses)")
    return (f"{label} changes a setting the replicas apply themselves, and this run uses "
            f"workers started by hand (a running registry): it does not reach them")
