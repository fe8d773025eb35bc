"""Matrix-multiply server of the matmul and ep benchmarks (seeds/002, seeds/004)."""

import time
from typing import Any

import numpy as np


def multiply_rows(rows: Any, b: Any, cost: float = 0.0) -> Any:
    """A block of rows of A (one row or several) times B, as one BLAS call. ``cost`` > 0
    models the work as that many seconds of sleep (for more servers than the machine
    has cores); the answer is then not computed."""
    if cost > 0:
        time.sleep(cost)
        return np.zeros((rows.shape[0], b.shape[1]), dtype=b.dtype)
    return rows @ b


def multiply_block(rows: Any, cols: Any) -> Any:
    """seeds/004: a block of rows of A times a block of columns of B."""
    return rows @ cols
