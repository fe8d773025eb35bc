"""Shared memory one side makes and the other maps: sealed, so it cannot shrink.

A memfd stays in the hands of the side that made it. Had it room to shrink the file
under a mapping the peer holds, the peer's next touch of the lost pages would be a
SIGBUS, and the whole process would die with every other client's calls. So every memfd
polybus passes (a ring, a segment, a shared operand's segment) is sealed at its size
before it is sent (``F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL``), and a receiver maps
only one sealed so (`check_sealed`): a peer's unsealed descriptor is refused.
"""

from __future__ import annotations

import fcntl
import os

__all__ = ["SEALS", "check_sealed", "sealed_memfd"]

SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


def sealed_memfd(name: str, size: int) -> int:
    """A new memfd of ``size`` bytes that no one can shrink or grow (its descriptor)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_sealed(fd: int) -> None:
    """ValueError unless ``fd`` is a memfd sealed against shrinking and growing (what a
    peer sends: `sealed_memfd`); a peer could otherwise shrink it under our mapping."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError as exc:
        raise ValueError(f"not a sealed memfd ({exc.strerror})") from None
    if seals & (fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) != (
            fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW):
        raise ValueError("a memfd that is not sealed against shrinking")
