"""How `broadcast` names and keeps a value that is not an array or bytes
(client/broadcastvalue.py): by its encoding, a copy kept as encoded, encoded for each
pickle setting of the modules it goes to before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from polybus.client.broadcastvalue import encoded
from polybus.errors import UnsendableError
from polybus.wire.codec import Codec


@dataclass
class Point:
    x: int
    y: int


def _session(**pickles: bool) -> Any:
    """A session whose modules (by key) have pickle on or off."""
    return SimpleNamespace(links={m: [SimpleNamespace(channel=SimpleNamespace(
        codec=Codec(allow_pickle=p)))] for m, p in pickles.items()})


def test_the_same_content_has_one_name_and_the_handle_keeps_a_copy() -> None:
    s = _session(server=False)
    table = {"rates": {"a": 1.5}, "w": np.arange(3.0), "t": (1, 2)}
    key, kept = encoded(s, table)
    assert encoded(s, {"rates": {"a": 1.5}, "w": np.arange(3.0), "t": (1, 2)})[0] == key
    table["rates"]["a"] = 9.0
    table["w"][0] = 7.0
    assert kept["rates"] == {"a": 1.5} and kept["w"][0] == 0.0 and kept["t"] == [1, 2]
    assert not kept["w"].flags.writeable  # (as the replicas hold it)
    assert encoded(s, table)[0] != key
    assert encoded(s, [1.5])[0] != encoded(s, [1])[0]


def test_each_pickle_setting_is_tried_before_anything_is_sent() -> None:
    mixed = _session(plain=False, pickled=True)
    with pytest.raises(UnsendableError) as e:
        encoded(mixed, {"f": Fraction(1, 3)})
    assert str(e.value).startswith("broadcast(...) to module 'plain', at ['f']: a value of "
                                   "type Fraction cannot be sent by the safe codec"), str(e.value)
    assert encoded(_session(pickled=True), {"f": Fraction(1, 3)})[1] == {"f": Fraction(1, 3)}
    # A dataclass: kept as itself where a module has pickle on (that one gets it so; one
    # with pickle off gets the dict of its fields when the copy is encoded for it).
    assert encoded(mixed, Point(1, 2))[1] == Point(1, 2)
    assert encoded(_session(plain=False), Point(1, 2))[1] == {"x": 1, "y": 2}
