"""Helpers the benchmark modules share: sizes, and running a peer that may be missing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from polybus.bench.peers import PeerUnavailable
from polybus.bench.report import BenchResult

__all__ = ["MB", "PLACEMENT_NOTE", "fmt_bytes", "try_peer", "unique"]

PLACEMENT_NOTE = ("cpus=split: client and server pinned to different CPUs; cpus=same: both on "
                  "one CPU; cpus=free: nothing pinned, as a user's own run is (see "
                  "polybus.bench.placement). Compare rows at the same placement.")

MB = 1_000_000
T = TypeVar("T")


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def fmt_bytes(n: float) -> str:
    return f"{int(n) // MB} MB" if n >= MB and n % MB == 0 else f"{int(n)} B"


def try_peer(result: BenchResult, system: str, fn: Callable[[], T]) -> T | None:
    """Run ``fn``; if the peer cannot run here, record why under ``skipped`` and go on."""
    if system in result.skipped:
        return None
    try:
        return fn()
    except PeerUnavailable as exc:
        result.skipped[system] = str(exc)
        peers = result.params.get("peers", {})
        peers.pop(system, None)  # (how it was to run: it did not; peer_rows `_record`)
        if not peers:
            result.params.pop("peers", None)
        return None
