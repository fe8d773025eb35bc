"""numpy, imported where an array first needs it, not when polybus is.

A worker serving a module that uses no arrays never needs numpy, whose import was a
third of such a worker's start (~0.1 s of CPU, of ~0.25 s). While numpy is not imported
in a process, no value in it is an array: the checks here say so without importing it.
Code that makes or reads arrays imports numpy itself, in the function that does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeGuard

    import numpy as np
    from typing_extensions import TypeIs

__all__ = ["is_array", "is_plain_array", "ndarray_type"]


def ndarray_type() -> type[Any] | None:
    """``numpy.ndarray`` if numpy is imported here, else None (no value is an array)."""
    # (getattr: a numpy still being imported, in another thread, has no ndarray yet,
    # and then no array either)
    return getattr(sys.modules.get("numpy"), "ndarray", None)


def is_array(x: object) -> TypeIs[np.ndarray[Any, Any]]:
    """``isinstance(x, numpy.ndarray)``, without importing numpy."""
    return isinstance(x, getattr(sys.modules.get("numpy"), "ndarray", ()))


def is_plain_array(x: object) -> TypeGuard[np.ndarray[Any, Any]]:
    """``type(x) is numpy.ndarray`` (not a subclass), without importing numpy."""
    return type(x) is getattr(sys.modules.get("numpy"), "ndarray", None)
