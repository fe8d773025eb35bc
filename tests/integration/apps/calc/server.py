"""Plain functions for the integration tests; no polybus import."""

import os

import numpy as np


def square(x):
    return x * x


def scale(arr, factor):
    return np.asarray(arr) * factor


def describe(arr):
    a = np.asarray(arr)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "sum": float(a.sum())}


def echo(value):
    return value


def pair(a, b):
    return [a, b]


def fail(message):
    raise ValueError(message)


def pid():
    return os.getpid()
