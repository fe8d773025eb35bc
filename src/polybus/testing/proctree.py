"""A process's children and descendants, read from /proc (Linux): what the tests and
the testing helpers end, by PID, however a check went."""

from __future__ import annotations

from pathlib import Path

__all__ = ["children", "descendants"]


def children(pid: int) -> set[int]:
    """Direct children of ``pid`` (all its threads'), from /proc."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.update(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return out


def descendants(pid: int) -> set[int]:
    """Every process descended from ``pid`` (not ``pid`` itself)."""
    seen: set[int] = set()
    todo = [pid]
    while todo:
        for c in children(todo.pop()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen
