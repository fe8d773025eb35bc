"""Sort server whose compute is modelled as time (BENCHMARKS.md: no scaling claims beyond
the cores there are): it sleeps the measured cost of sorting its part, then sorts it."""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def sort_modelled(part: Any, seconds: float) -> Any:
    time.sleep(seconds)
    return np.sort(np.asarray(part), kind="stable")
