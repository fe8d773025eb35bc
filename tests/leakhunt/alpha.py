"""The first stage: numpy answers, a slow call, and a look inside the replica."""

import time

import numpy as np
import probe as _probe


def add(a, b):
    return a + b


def cadd(a, b):  # b cached (app.toml)
    return a + b


def scale(x, k):
    return np.asarray(x) * k


def tiny(i):
    return i + 1


def total(x):
    return float(np.sum(x))


def slow(s):
    time.sleep(s)
    return s


def probe():
    return _probe.snapshot()
