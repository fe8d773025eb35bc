"""Content names of operands (client/naming.py): what is hashed once, what every call."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from polybus.client import naming
from polybus.client.naming import Known, content_key


def _frozen(shape: tuple[int, ...] = (8, 8), seed: int = 0) -> np.ndarray[Any, Any]:
    a = np.random.default_rng(seed).random(shape)
    a.flags.writeable = False
    return a


def test_a_fresh_view_of_a_frozen_array_is_named_once_per_place(monkeypatch: Any) -> None:
    a = _frozen()
    hashed = _counting(monkeypatch)
    first = content_key(a[2:4])
    assert content_key(a[2:4]) == first  # another view object, the same rows
    assert content_key(a[:, 1:3]) != first and content_key(a[:, 1:3]) == content_key(a[:, 1:3])
    assert hashed == [(2, 8), (8, 2)]  # each place hashed once
    # the name is the content's, whatever the place: a copy of those rows has it too
    assert first == naming._array_digest(np.array(a[2:4]))


def test_views_of_a_writable_array_are_hashed_at_every_call() -> None:
    a = np.random.default_rng(1).random((4, 4))
    v = a[1:3]
    v.flags.writeable = False  # read-only itself, but what it views can change
    before = content_key(v)
    a[1, 0] += 1.0
    assert content_key(a[1:3]) != before


def test_a_view_name_lives_as_long_as_the_array_it_views() -> None:
    """The rows stay named (kept at the replicas) while the matrix lives, though every
    call's view is freed; when the matrix goes, each session is told to drop them."""
    known = Known()
    a = _frozen(seed=2)
    key = content_key(a[0:2])
    assert key is not None
    gc.collect()  # the view is gone
    _settle()
    assert naming._live.get(key, 0) == 1 and key not in known.dead
    del a
    gc.collect()
    _settle()
    assert key not in naming._live and key in known.dead


def _settle() -> None:
    with naming._lock:
        naming._settle()


def test_a_view_of_a_view_is_named_by_its_place_in_the_owner(monkeypatch: Any) -> None:
    a = _frozen((6, 6), seed=3)
    hashed = _counting(monkeypatch)
    rows = a[1:5]
    key = content_key(rows[1:3])
    assert content_key(a[2:4]) == key and hashed == [(2, 6)]  # one place, hashed once
    assert content_key(a[2:4][:, ::2]) == naming._array_digest(np.array(a[2:4, ::2]))


def test_places_remembered_are_bounded(monkeypatch: Any) -> None:
    """Past VIEW_PLACES places at once, a new place's view is named per object, as
    before; the places remembered are still found without a pass over their bytes."""
    a = _frozen((16, 4), seed=4)
    monkeypatch.setattr(naming, "VIEW_PLACES", len(naming._views) + 2)
    hashed = _counting(monkeypatch)
    first = [content_key(a[i:i + 2]) for i in range(2)]
    assert len(hashed) == 2
    late = a[8:10]
    assert content_key(late) == content_key(late)  # per object: remembered by id
    assert content_key(a[8:10]) is not None and len(hashed) == 4  # a new view: hashed
    assert sum(1 for place in naming._views if place[0] == id(a)) == 2
    assert [content_key(a[i:i + 2]) for i in range(2)] == first and len(hashed) == 4


def test_an_array_made_writable_again_forgets_the_places_named_in_it() -> None:
    """Seen writable (a call while it is), an array's remembered places go: a view of it
    frozen again after a change is named by its new bytes, not the old place's name."""
    a = np.random.default_rng(5).random((4, 4))
    a.flags.writeable = False
    before = content_key(a[0:2])
    a.flags.writeable = True
    a[0, 0] += 1.0
    assert content_key(a[0:2]) != before
    a.flags.writeable = False
    after = content_key(a[0:2])
    assert after != before and after == naming._array_digest(np.array(a[0:2]))


def test_structured_dtypes_of_one_size_have_names_of_their_own() -> None:
    raw = np.arange(8, dtype=np.uint8)
    one = raw.view(np.dtype([("x", "<u4"), ("y", "<u4")]))
    other = raw.view(np.dtype([("a", "<u8")]))
    assert content_key(one) != content_key(other)


def test_a_forgotten_replica_is_taken_to_hold_nothing() -> None:
    """(a new connection to it: client/revive.py) its operands are Put again, and
    nothing is left to drop there."""
    from types import SimpleNamespace

    r0, r1 = SimpleNamespace(name="r0"), SimpleNamespace(name="r1")
    known = Known()
    known.of(r1).add("k1", 10)  # type: ignore[arg-type]
    known.of(r0).add("k0", 10)  # type: ignore[arg-type]
    known._drops["r1"] = ["k2"]
    known.forget("r1")
    assert "k1" not in known.of(r1) and "k0" in known.of(r0)  # type: ignore[arg-type]
    assert known.drops_for(r1) == []  # type: ignore[arg-type]


def _counting(monkeypatch: Any) -> list[tuple[int, ...]]:
    """The shapes `_array_digest` is asked to hash from now on."""
    hashed: list[tuple[int, ...]] = []
    digest = naming._array_digest

    def counted(x: np.ndarray[Any, Any], *sample: Any) -> str:
        hashed.append(x.shape)
        return digest(x, *sample)

    monkeypatch.setattr(naming, "_array_digest", counted)
    return hashed


@pytest.mark.parametrize("make", [
    lambda: np.random.default_rng(1).random((10, 10)),
    lambda: np.arange(12.0).reshape(3, 4).T,  # (not contiguous)
    lambda: np.ones(()),
    lambda: np.zeros((0, 3)),
    lambda: np.arange(10).astype("M8[s]"),  # (no buffer protocol)
    lambda: np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]),
    lambda: np.random.default_rng(2).random((300, 300)),  # (past WHOLE_BYTES: sampled)
])
def test_a_frozen_array_is_named_as_a_writable_one_of_the_same_content(make: Any) -> None:
    """A frozen array's name is hashed from the bytes its sample already holds (a small
    one's: all of them); the name is the content's all the same, whoever holds it."""
    writable, frozen = make(), make()
    frozen.flags.writeable = False
    assert content_key(frozen) == content_key(writable) == content_key(np.array(writable))


def test_a_masked_array_is_not_named() -> None:
    """A masked array travels pickled, its mask and fill value with its data; named by
    its data bytes (as it once was), two masks over the same data shared a name, and a
    replica holding one handed it to a call passing the other
    (integration/test_cache_content_names.py). It goes by value, uncached; naming it
    raises nothing (a frozen small one's sample, filled where masked, once stood in for
    its bytes, and a contiguous one's own ``view`` raised a ValueError)."""
    data = np.arange(6.0)
    m1 = np.ma.masked_array(data, mask=[0, 0, 1, 0, 0, 0])
    m2 = np.ma.masked_array(data.copy(), mask=[0, 0, 0, 1, 0, 0])
    m2.flags.writeable = False
    big = np.ma.masked_array(np.arange(40_000.0), mask=False)  # (past the whole sample)
    for m in (m1, m2, big):
        assert content_key(m) is None
    assert content_key(data) is not None
