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
