"""A cached operand's name tells apart every value the replica could be given for it:
two values that arrive as different things never share a name (were they to, the
replica holding the first would hand it to a call passing the second, silently).

Found by a review: a masked array was named by its data alone (not its mask), so two
masked arrays with the same data and different masks, or a masked array and a plain
array of that data, shared a name; and bytes were named by their bytes with no prefix,
so bytes spelling an array's dtype, shape and bytes shared that array's name; and a
subclass that travels as itself (a recarray, pickled) shared a plain array's name."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_bound_app

MASKS_SERVER = """
    import numpy as np

    def mask_of(m):
        return [type(m).__name__, np.ma.getmaskarray(m).tolist()]
"""

MASKS_CLIENT = """
    import numpy as np
    import polybus
    from polybus import use, wait

    mask_of = use("mask_of")

    def main():
        data = np.arange(4.0)
        one = np.ma.masked_array(data, mask=[0, 1, 0, 0])
        other = np.ma.masked_array(data.copy(), mask=[0, 0, 0, 1])
        plain = data.copy()
        calls = [mask_of(one), mask_of(other), mask_of(plain), mask_of(one)]
        handles = [polybus.broadcast(one), polybus.broadcast(other)]
        calls += [mask_of(h) for h in handles]
        return [wait(c) for c in calls]
"""

F, T = False, True


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", ["sync", "async"])
def test_masked_arrays_with_other_masks_are_other_operands(tmp_path: Path, style: str) -> None:
    app = write_bound_app(tmp_path, server=MASKS_SERVER, client=MASKS_CLIENT,
                          names=("mask_of",),
                          server_keys='pickle = true\ndefine.mask_of = { cache = ["m"] }',
                          client_keys=f'use.mask_of = {{ callstyle = "{style}" }}')
    r = polybus.run(app, worker_output=None)
    assert r.result == [["MaskedArray", [F, T, F, F]], ["MaskedArray", [F, F, F, T]],
                        ["ndarray", [F, F, F, F]], ["MaskedArray", [F, T, F, F]],
                        ["MaskedArray", [F, T, F, F]], ["MaskedArray", [F, F, F, T]]]


KINDS_SERVER = """
    def kind(x):
        return [type(x).__name__, len(x)]
"""

KINDS_CLIENT = """
    import numpy as np
    from polybus import use, wait

    kind = use("kind")

    def main():
        x = np.arange(4.0)
        spelled = b"<f8(4,)" + x.tobytes()  # bytes spelling x's dtype, shape and bytes
        return [wait(kind(x)), wait(kind(spelled)), wait(kind(bytearray(spelled)))]
"""


@pytest.mark.timeout(60)
def test_bytes_never_share_an_array_s_name(tmp_path: Path) -> None:
    app = write_bound_app(tmp_path, server=KINDS_SERVER, client=KINDS_CLIENT,
                          names=("kind",), server_keys='define.kind = { cache = ["x"] }')
    r = polybus.run(app, worker_output=None)
    assert r.result == [["ndarray", 4], ["bytes", 39], ["bytes", 39]]


SUBCLASS_CLIENT = """
    import numpy as np
    from polybus import use, wait

    kind = use("kind")

    def main():
        plain = np.zeros(3, dtype=[("a", "f8"), ("b", "i4")])
        rec = plain.view(np.recarray)  # (the same bytes, dtype and shape)
        return [wait(kind(plain)), wait(kind(rec)), wait(kind(plain))]
"""


@pytest.mark.timeout(60)
def test_a_subclass_that_travels_as_itself_has_a_name_of_its_own(tmp_path: Path) -> None:
    """A structured array travels pickled, as what it is: a recarray arrives a recarray
    (its fields read as attributes), a plain structured array a plain one. Named by
    dtype, shape and bytes alone, the two shared a name."""
    app = write_bound_app(tmp_path, server=KINDS_SERVER, client=SUBCLASS_CLIENT,
                          names=("kind",),
                          server_keys='pickle = true\ndefine.kind = { cache = ["x"] }')
    r = polybus.run(app, worker_output=None)
    assert r.result == [["ndarray", 3], ["recarray", 3], ["ndarray", 3]]
