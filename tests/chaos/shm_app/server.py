"""Server of the shm lifetime tests."""

from typing import Any


def mul(row: Any, b: Any) -> Any:
    return row @ b


def echo(x: Any) -> Any:
    return x


_kept: dict[int, Any] = {}


def keep(slot: int, x: Any) -> float:
    """Holds the received array itself (a view of the client's segment, or of the
    frame's memory) for a later call: it must not change meanwhile."""
    _kept[slot] = x
    return float(x.sum())


def kept(slot: int) -> Any:
    return _kept[slot]
