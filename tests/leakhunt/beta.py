"""The second stage: takes a forwarded value."""

import numpy as np
import probe as _probe


def finish(x):
    return float(np.asarray(x).sum())


def probe():
    return _probe.snapshot()
