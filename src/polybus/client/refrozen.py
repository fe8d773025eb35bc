"""Whether a frozen array whose name is remembered was changed since (client/naming.py).

An array read-only through and through is hashed once and its name remembered
(naming.py, `content_key`); a program that makes it writable again, changes it and
freezes it again would have the old name sent, and a replica holding that name would
compute with the old bytes, silently (found by a new-user trial). numpy counts no
changes to an array, and hashing it at each call is the pass freezing saves, so a
remembered name keeps a sample of the array's bytes as they were when it was hashed,
and each call that would use the name looks at the sample again: an array of
``WHOLE_BYTES`` or less is compared whole, a larger one at ``SAMPLE`` elements spread
evenly over it (first and last among them). Differing, the array was changed: it is
hashed again (naming.py), and the program is told, once per array (`said_changed`). A
change that touches none of the sampled elements goes unseen.

Measured here (one process, timeit, a 300x300 or 1000x1000 float64 array): finding a
remembered name took 0.31 us a call before the check and 0.78 us with it (0.25 and
0.71 us on the quick path, `remembered`); a fresh non-contiguous view of a frozen
array, 2.1 and 2.9 us. Comparing 16 KiB whole takes ~0.45 us, about what a sample
does; hashing even 4 KiB takes ~2.7 us (most of it the work around the hash).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import numpy as np

from polybus.wire.arrays import owner_of

__all__ = ["SAMPLE", "WHOLE_BYTES", "Sample", "said_changed", "sample_of", "unchanged"]

log = logging.getLogger("polybus.client")

SAMPLE = 64  # elements looked at in an array larger than WHOLE_BYTES
WHOLE_BYTES = 16 << 10  # an array this small or smaller is compared whole

# Where the sample lies (flat indices of the elements; None: the whole array), its bytes
# then, and the array's layout then (dtype, shape, strides: each can be set in place on
# a read-only array, and the name hashes dtype and shape). The indices hold no
# reference to the array: a view of the same place has the same shape, so one sample
# serves every view of it (naming.py, `_views`).
Sample = tuple["np.ndarray[Any, Any] | None", bytes, tuple[Any, ...]]

_said: dict[int, weakref.ref[Any]] = {}  # id -> an array the program was told of


def sample_of(arr: np.ndarray[Any, Any]) -> Sample:
    """The sample of ``arr``'s bytes that `unchanged` compares with."""
    layout = (arr.dtype, arr.shape, arr.strides)
    if arr.nbytes <= WHOLE_BYTES:
        return None, arr.tobytes(), layout
    where = np.linspace(0, arr.size - 1, SAMPLE).astype(np.intp)
    return where, _at(arr, where), layout


def unchanged(arr: np.ndarray[Any, Any], sample: Sample | None) -> bool:
    """Whether ``arr``'s bytes at ``sample`` are as they were (True for no sample: a
    copy polybus made, naming.py's `adopt`, which the program cannot change)."""
    if sample is None:
        return True
    where, then, layout = sample
    if (arr.dtype is not layout[0] or arr.shape != layout[1]
            or arr.strides != layout[2]):  # (set in place: named anew)
        return False
    return (arr.tobytes() if where is None else _at(arr, where)) == then


def _at(arr: np.ndarray[Any, Any], where: np.ndarray[Any, Any]) -> bytes:
    # (take on a contiguous array looks only at those elements; on any other it would
    # copy the whole array first, where `flat` walks to each of them)
    if arr.flags.c_contiguous:
        return arr.take(where).tobytes()
    return arr.flat[where].tobytes()


def said_changed(arr: np.ndarray[Any, Any]) -> None:
    """Tell the program, once per array it froze (a view's owner: the last of its
    bases), that ``arr`` was changed after its name was remembered."""
    owner = owner_of(arr)
    ident = id(owner)
    seen = _said.get(ident)
    if seen is not None and seen() is owner:
        return
    _said[ident] = weakref.ref(owner, lambda _ref: _said.pop(ident, None))
    log.warning(
        "polybus: warning: a frozen array (%s, shape %s) passed as a cached operand was "
        "changed after it was frozen (made writable, changed and made read-only again); "
        "polybus hashed it again this time, so the replicas got its new bytes, but it "
        "looks for such a change at only %d of a large array's elements, and a change "
        "that touches none of them would go unseen: make it writable and leave it so "
        "(it is then hashed at every call), or pass a new array",
        owner.dtype, owner.shape, SAMPLE)
