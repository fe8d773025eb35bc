"""What a replica holds, seen from inside it (imported by the served modules).

`snapshot()` finds the process's WorkerRuntime with gc and walks its attributes a few
levels deep, recording the length of every dict, set, list or deque it meets by path
(``_channels``, ``cache._users``, ``forwarding.store._pins``, ...): a structure that grows
with the sessions served shows up as a path whose length climbs wave after wave. It
adds the counts of the most common object types, and, when the replica was started with
PYTHONTRACEMALLOC, the lines that allocated the most.
"""

from __future__ import annotations

import collections
import gc
import os
import threading
import tracemalloc
from typing import Any

_CONTAINERS = (dict, set, frozenset, list, collections.deque)


def _walk(obj: Any, path: str, depth: int, seen: set[int], out: dict[str, int]) -> None:
    if id(obj) in seen or depth < 0:
        return
    seen.add(id(obj))
    if isinstance(obj, _CONTAINERS):
        out[path] = len(obj)
        if isinstance(obj, dict) and depth > 0:  # one level into a dict's values
            for v in list(obj.values())[:3]:
                if hasattr(v, "__dict__") or hasattr(v, "__slots__"):
                    _walk(v, path + "[]", depth - 1, seen, out)
        return
    if type(obj).__module__.split(".")[0] != "polybus":
        return
    fields: dict[str, Any] = {}
    if hasattr(obj, "__dict__"):
        fields.update(vars(obj))
    for cls in type(obj).__mro__:
        for s in getattr(cls, "__slots__", ()):
            if hasattr(obj, s):
                fields[s] = getattr(obj, s)
    for k, v in fields.items():
        _walk(v, f"{path}.{k}" if path else k, depth - 1, seen, out)


def snapshot(types: int = 25, lines: int = 8) -> dict[str, Any]:
    gc.collect()
    objs = gc.get_objects()
    runtimes = [o for o in objs if type(o).__name__ == "WorkerRuntime"]
    sizes: dict[str, int] = {}
    for rt in runtimes[:1]:
        _walk(rt, "", 4, set(), sizes)
    counts = collections.Counter(type(o).__qualname__ for o in objs)
    top = dict(counts.most_common(types))
    out: dict[str, Any] = {"pid": os.getpid(), "threads": threading.active_count(),
                           "thread_names": sorted(t.name for t in threading.enumerate()),
                           "sizes": sizes, "types": top, "objects": len(objs)}
    out["rss_kb"], out["rss_trimmed_kb"] = _rss_kb(), _trimmed_rss_kb()
    out["tables"] = _tables()
    out["weakrefs"] = _weakrefs(objs)
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        out["traced_bytes"] = tracemalloc.get_traced_memory()[0]
        out["traced"] = [(str(s.traceback[0]), s.size, s.count)
                         for s in snap.statistics("lineno")[:lines]]
    return out


def _tables() -> dict[str, int]:
    """polybus's module-level tables (each bounded by its own rule)."""
    import sys
    out = {}
    for mod, name in [("polybus.worker.readonly", "_cached"),
                      ("polybus.transport.shmshare", "_seen"),
                      ("polybus.wire.arrays", "_kept"),
                      ("polybus.worker.unread", "_writing")]:
        m = sys.modules.get(mod)
        if m is not None and hasattr(m, name):
            out[f"{mod.rsplit('.', 1)[1]}.{name}"] = len(getattr(m, name))
    return out


def _weakrefs(objs: list[Any], last: int = 20) -> dict[str, Any]:
    """What the weak references point at (by type, 'dead' for a referent gone), and
    who holds the last ``last`` of them."""
    import weakref
    refs = [o for o in objs if type(o) is weakref.ref]
    kinds = collections.Counter(
        "dead" if r() is None else type(r()).__qualname__ for r in refs)
    holders: collections.Counter[str] = collections.Counter()
    for r in refs[-last:]:
        for h in gc.get_referrers(r):
            if h is objs or h is refs:
                continue
            what = type(h).__qualname__
            if isinstance(h, dict) and len(h) < 50:
                what += "{" + ",".join(sorted(map(str, list(h)[:4]))) + "}"
            holders[what] += 1
    return {"to": dict(kinds.most_common(12)), "held_by": dict(holders.most_common(8))}


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _trimmed_rss_kb() -> int:
    """VmRSS once glibc gave back what it can of its free memory (malloc_trim): what
    the process holds live, apart from what its allocator keeps for reuse (design.md,
    "Freed memory kept for the next message"). -1 where there is no glibc."""
    import ctypes
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return -1
    return _rss_kb()
