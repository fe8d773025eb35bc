"""Memory for large frame bodies (wire/framing.py), used again once nothing refers to it."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ALIGN", "SpareBodies"]

ALIGN = 64  # a body (and every buffer in it) starts on a multiple of this many bytes
_KEEP = 1 << 20  # bodies at least this long are kept for reuse
_PREPARE_MAX = 64 << 20  # and up to this long made ready ahead (memory held in advance)


class SpareBodies:
    """Memory for large frame bodies, used again once nothing refers to it.

    Touching fresh memory costs a page fault per 4 KiB (a 64 MB body: 16,000 faults,
    as long as receiving it). An array handed to the program keeps its body alive
    through numpy's base chain, so a spare whose only references are ours is free.
    A body kept alive for long (an operand a replica caches) leaves no free spare for
    the next one of its size: `prepare` makes one, pages touched, when the receiver has
    nothing else to do, so that first touch is not paid while a frame is on its way.
    """

    def __init__(self, keep_bytes: int = 512 * 1024 * 1024, keep: int = 4) -> None:
        self.keep_bytes = keep_bytes
        self.keep = keep
        self._spares: list[Any] = []
        self.short = 0  # size of a large body taken when no other free spare was left

    def _fits(self, length: int, skip: Any = None) -> Any:
        """The smallest free spare for ``length`` bytes, not 4x too big, or None."""
        best = None
        for spare in self._spares:
            # Free: only the list, the loop and getrefcount's argument refer to it. The
            # smallest that fits, and not 4x too big: an array the program keeps pins
            # its whole body.
            if (spare is not skip and length + ALIGN <= spare.nbytes <= 4 * length
                    and sys.getrefcount(spare) == 3
                    and (best is None or spare.nbytes < best.nbytes)):
                best = spare
        return best

    def take(self, length: int) -> Any:
        """``length`` bytes starting on a 64-byte boundary (so are the buffers in them)."""
        best = self._fits(length)
        if best is None:
            import numpy as np

            best = np.empty(length + ALIGN, dtype=np.uint8)
            self._keep(best)
            if length >= _KEEP:
                self.short = length
        elif length >= _KEEP and self._fits(length, skip=best) is None:
            self.short = length  # the last free one of this size
        skip = -best.__array_interface__["data"][0] % ALIGN
        return best[skip:skip + length]

    def _keep(self, body: Any) -> bool:
        if sum(b.nbytes for b in self._spares) + body.nbytes > self.keep_bytes:
            return False
        self._spares.append(body)
        if len(self._spares) > self.keep:
            self._spares.pop(0)
        return True

    def prepare(self) -> None:
        """Make one free spare of the size last found short, its pages touched."""
        length, self.short = self.short, 0
        if length and length <= _PREPARE_MAX and self._fits(length) is None:
            import numpy as np

            body = np.empty(length + ALIGN, dtype=np.uint8)
            body[::4096] = 0  # one write per page faults it in (huge pages too)
            self._keep(body)
