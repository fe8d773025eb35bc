"""Server module of the call-path benchmarks: plain functions, no polybus import."""

from __future__ import annotations

from typing import Any


def echo(payload: Any) -> Any:
    """Round trip: the payload comes back as it went."""
    return payload


def sink(array: Any) -> int:
    """One-way transfer: the array stays here; only its size goes back."""
    return int(array.nbytes)


def noop(x: int) -> int:
    """Throughput: nothing, so only the call path is measured."""
    return x
