"""A frozen array made writable, changed and frozen again (client/refrozen.py): the
sample kept with its remembered name shows the change, and it is named anew."""

from __future__ import annotations

import gc
import logging
from typing import Any

import numpy as np
import pytest

from polybus.client import naming
from polybus.client.naming import Known, content_key, remembered
from polybus.client.refrozen import WHOLE_BYTES, sample_of


def _frozen(shape: tuple[int, ...], seed: int = 0) -> np.ndarray[Any, Any]:
    a = np.random.default_rng(seed).random(shape)
    a.flags.writeable = False
    return a


def _change(a: np.ndarray[Any, Any], where: Any, value: float) -> None:
    a.flags.writeable = True
    a[where] = value
    a.flags.writeable = False


def _counting(monkeypatch: Any) -> list[tuple[int, ...]]:
    """The shapes `_array_digest` is asked to hash from now on."""
    hashed: list[tuple[int, ...]] = []
    digest = naming._array_digest

    def counted(x: np.ndarray[Any, Any], *sample: Any) -> str:
        hashed.append(x.shape)
        return digest(x, *sample)

    monkeypatch.setattr(naming, "_array_digest", counted)
    return hashed


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if "changed after it was frozen" in r.getMessage()]


def test_an_unchanged_frozen_array_keeps_its_name_unhashed(monkeypatch: Any) -> None:
    a = _frozen((100, 100))
    hashed = _counting(monkeypatch)
    key = content_key(a)
    assert [content_key(a) for _ in range(3)] == [key] * 3 and remembered(a) == key
    assert hashed == [(100, 100)]


def test_a_refrozen_array_is_hashed_again_and_said_once(
        monkeypatch: Any, caplog: pytest.LogCaptureFixture) -> None:
    known = Known()
    a = _frozen((100, 100), seed=1)
    hashed = _counting(monkeypatch)
    old = content_key(a)
    assert old is not None
    _change(a, slice(None), 1.0)
    assert remembered(a) is None  # (the quick path leaves it to content_key)
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        new = content_key(a)
        assert new == naming._array_digest(np.array(a)) and new != old
        assert remembered(a) == new and content_key(a) == new
        _change(a, slice(None), 2.0)  # changed again: named anew, not said again
        assert content_key(a) not in (old, new, None)
    assert len(hashed) == 1 + 1 + 1 + 1  # (the test's own digest of the copy counts once)
    said = _said(caplog)
    assert len(said) == 1 and "(float64, shape (100, 100))" in said[0], said
    with naming._lock:
        naming._settle()
    assert old not in naming._live and old in known.dead  # its old name let go


def test_a_change_the_sample_misses_goes_unseen() -> None:
    """(what the docs say: only the sampled elements are looked at)"""
    a = _frozen((100, 100), seed=2)
    where = sample_of(a)[0]
    assert where is not None and 1 not in where
    key = content_key(a)
    _change(a, (0, 1), -1.0)
    assert content_key(a) == key


def test_a_small_array_is_compared_whole(caplog: pytest.LogCaptureFixture) -> None:
    a = _frozen((WHOLE_BYTES // 8,), seed=3)
    assert sample_of(a)[0] is None
    key = content_key(a)
    _change(a, 1, -1.0)  # (an element a sample of 64 would miss)
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        assert content_key(a) not in (key, None)
    assert len(_said(caplog)) == 1


def test_views_of_a_refrozen_array_are_named_anew(
        monkeypatch: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A fresh view of the same place is found changed by its own sample; every place
    named in the array goes, and the array's own name with them."""
    a = _frozen((200, 200), seed=4)
    whole = content_key(a)
    rows, cols = content_key(a[10:20]), content_key(a[:, 50:60])
    hashed = _counting(monkeypatch)
    assert content_key(a[10:20]) == rows and hashed == []
    _change(a, slice(None), 0.5)
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        assert content_key(a[10:20]) == naming._array_digest(np.array(a[10:20])) != rows
        assert remembered(a) is None  # the array's own name goes too
        assert content_key(a) not in (whole, None)
        assert content_key(a[:, 50:60]) not in (cols, None)  # its place was forgotten
    assert len(_said(caplog)) == 1  # once for the array, however it was passed
    assert sum(1 for place in naming._views if place[0] == id(a)) == 2
    del a
    gc.collect()


def test_a_non_contiguous_view_is_sampled_where_it_lies() -> None:
    a = _frozen((300, 300), seed=5)
    v = a[::3, 1::2]
    where, then, _ = sample_of(v)
    assert where is not None and then == np.array(v).reshape(-1)[where].tobytes()


def test_a_sample_that_differs_over_the_same_bytes_keeps_the_name(monkeypatch: Any) -> None:
    """(another thread changed the array and back between its sample and its hash): the
    bytes hash to the name remembered, which stays, with the sample taken anew."""
    a = _frozen((100, 100), seed=6)
    key = content_key(a)
    assert key is not None
    monkeypatch.setattr(naming, "unchanged", lambda arr, sample: False)
    assert content_key(a) == key
    monkeypatch.undo()
    assert remembered(a) == key and naming._live.get(key) == 1


@pytest.mark.parametrize("n", [10, 1000])  # compared whole, and by a sample
def test_a_frozen_array_given_a_new_shape_or_dtype_in_place_is_named_anew(n: int) -> None:
    # Review: the sample compares bytes only. An array's own shape or dtype set in place
    # (allowed on a read-only array) keeps its bytes, so the old name (which hashes
    # dtype and shape) was sent; with a larger itemsize the sample's indices passed its
    # size and content_key raised IndexError.
    a = np.arange(n * n, dtype=np.float64).reshape(n, n).copy()
    a.flags.writeable = False
    content_key(a)
    a.shape = (n * n,)
    assert content_key(a) == naming._array_digest(a)
    assert remembered(a) in (None, naming._array_digest(a))
    a.dtype = np.complex128  # (itemsize 16: half as many elements)
    assert content_key(a) == naming._array_digest(a)
