"""A broadcast handle used in the client as if it were its value (a program ported from
Ray's ``ray.get(ref)``: ``polybus.wait(h)`` is ``h``): ``np.asarray(h)`` made a 0-d array
of the handle object, silently, and ``h.mean()`` said only "'Shared' object has no
attribute 'mean'". Both now say what a handle is and what to use."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from polybus.client.shared import Shared

HINT = r"a broadcast handle.*not its value.*use the value you broadcast"


def test_numpy_refuses_a_handle_as_an_array_saying_what_to_use() -> None:
    h = Shared("k" * 16, np.arange(4.0))
    with pytest.raises(TypeError, match=HINT):
        np.asarray(h)
    with pytest.raises(TypeError, match=HINT):
        np.sum(h)


def test_an_attribute_of_the_value_says_what_a_handle_is() -> None:
    h = Shared("k" * 16, np.arange(4.0))
    with pytest.raises(AttributeError, match=HINT + r".*'mean'"):
        h.mean()
    # still an AttributeError: hasattr and getattr with a default work as ever
    assert not hasattr(h, "nbytes") and getattr(h, "shape", None) is None
    assert h.value is not None and h.key == "k" * 16


def test_a_handle_still_copies_and_pickles_as_its_value() -> None:
    h = Shared("k" * 16, [1, 2])
    assert pickle.loads(pickle.dumps(h)) == [1, 2]
    assert copy.copy(h) is not None
