"""Plain functions; the transport is the configuration's business."""

from __future__ import annotations

from typing import Any

import numpy as np


def echo(value: Any) -> Any:
    return value


def scaled(array: Any, factor: float) -> Any:
    return np.asarray(array) * factor


def make(n: int) -> Any:
    return np.arange(n, dtype=np.float64)
