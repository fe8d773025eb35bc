"""Naming the argument a call could not send (client/unsendable.py)."""

from __future__ import annotations

import pytest

from polybus.client.unsendable import named
from polybus.errors import UnsendableError, UsageError


def test_names_the_first_positional_argument_that_cannot_be_sent() -> None:
    err = named("quicksort", [[1, 2], object(), object()], None, TypeError("why"), False)
    assert str(err) == "quicksort(...) argument 2: why"
    assert isinstance(err, TypeError) and isinstance(err, UsageError)


def test_names_a_keyword_argument() -> None:
    err = named("f", [1], {"ok": "x", "bad": {"deep": [object()]}}, TypeError("why"), False)
    assert str(err) == "f(...) argument 'bad': why"


def test_no_argument_named_when_none_fails_alone() -> None:
    # (an object pickles where pickle is on: the failure was not an argument's)
    err = named("f", [object()], None, TypeError("why"), True)
    assert str(err) == "f(...): why"


def test_an_int_too_large_for_msgpack_is_named_too() -> None:
    err = named("f", [1, 1 << 70], None, OverflowError("too big"), False)
    assert str(err) == "f(...) argument 2: too big"
    with pytest.raises(UnsendableError):
        raise err


def test_a_masked_array_is_refused_by_the_safe_codec_and_pickled_with_its_mask() -> None:
    # It was sent as a plain ndarray: the masked elements' fill value (999999) in place
    # of them, the mask dropped without a word.
    import numpy as np

    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call

    masked = np.ma.array([1, 2], mask=[0, 1])
    err = named("f", [np.arange(3), masked], None, TypeError("why"), False)
    assert str(err).startswith("f(...) argument 2: why")
    with pytest.raises(TypeError, match=r"masked array .* send its \.data and \.mask"):
        Codec().encode_parts(Call(0, "f", [masked], None))
    header, bufs = Codec(allow_pickle=True).encode_parts(Call(0, "f", [masked], None))
    got = Codec(allow_pickle=True).decode_value(header, list(bufs))  # type: ignore[arg-type]
    back = got[3][0]  # (a Call is [tag, id, interface, args, kwargs])
    assert isinstance(back, np.ma.MaskedArray)
    assert back.mask.tolist() == [False, True] and back.data.tolist() == [1, 2]
