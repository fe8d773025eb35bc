"""Naming the argument a call could not send (client/unsendable.py)."""

from __future__ import annotations

import pytest

from polybus.client.unsendable import named
from polybus.errors import UnsendableError, UsageError
from polybus.wire.unsendablepath import at, path_in


def test_names_the_first_positional_argument_that_cannot_be_sent() -> None:
    err = named("quicksort", [[1, 2], object(), object()], None, TypeError("why"), False)
    assert str(err) == "quicksort(...) argument 2: why"
    assert isinstance(err, TypeError) and isinstance(err, UsageError)


def test_names_a_keyword_argument() -> None:
    err = named("f", [1], {"ok": "x", "bad": {"deep": [object()]}}, TypeError("why"), False)
    assert str(err) == "f(...) argument 'bad', at ['deep'][0]: why"


def test_says_where_inside_the_argument_the_value_sits() -> None:
    # It said "argument 2: a value of type lock cannot be sent", the lock anywhere in it.
    import threading

    bad = [0, (1, {"ok": 2, "lock": threading.Lock()})]
    err = named("f", [1, bad], None, TypeError("why"), False)
    assert str(err) == "f(...) argument 2, at [1][1]['lock']: why"


def test_paths_through_dataclasses_and_nothing_when_the_value_itself_fails() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Job:
        name: str
        payload: object

    assert path_in({"jobs": [Job("a", 1), Job("b", object())]}, False) == "['jobs'][1].payload"
    assert path_in(object(), False) == ""
    assert path_in({1, 2}, False) == ""  # (a set, not walked)
    assert at([1], ValueError("too large"), False) == ""  # (not a value the codec refuses)
    assert at([object()], TypeError("why"), False, "result") == ", at result[0]"


def test_no_path_in_a_value_nested_too_deeply() -> None:
    # Every step of one fails: the message says to flatten it, and stays as it was.
    from polybus.wire.unencodable import too_deep

    deep: list[object] = []
    for _ in range(3000):
        deep = [deep]
    assert at(deep, too_deep(), False) == ""


def test_no_argument_named_when_none_fails_alone() -> None:
    # (an object pickles where pickle is on: the failure was not an argument's)
    err = named("f", [object()], None, TypeError("why"), True)
    assert str(err) == "f(...): why"


def test_an_int_too_large_for_msgpack_is_named_too() -> None:
    err = named("f", [1, 1 << 70], None, OverflowError("too big"), False)
    assert str(err).startswith("f(...) argument 2: an int outside msgpack's 64 bits")
    with pytest.raises(UnsendableError):
        raise err


@pytest.mark.parametrize("pickle", [False, True])
def test_an_int_too_large_for_msgpack_says_what_to_send_instead(pickle: bool) -> None:
    # It said msgspec's "can't serialize ints < -2**63 or > 2**64 - 1" alone: neither
    # what to do, nor that pickle = true does not carry it either.
    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call, Result
    from polybus.worker.replies import unsendable_text

    with pytest.raises(OverflowError) as info:
        Codec(allow_pickle=pickle).encode_parts(Call(0, "f", [{"n": [1, 2**70]}], None))
    err = named("f", [{"n": [1, 2**70]}], None, info.value, pickle)
    assert str(err) == ("f(...) argument 1, at ['n'][1]: an int outside msgpack's 64 bits "
                        "(from -2**63 to 2**64 - 1) cannot be sent, pickle = true or not: "
                        "send str(n), and int(s) where it arrives")
    with pytest.raises(OverflowError) as info:
        Codec(allow_pickle=pickle).encode_parts(Result(0, -(2**64)))
    assert unsendable_text(info.value) == (
        "the value it returned cannot be sent: an int outside msgpack's 64 bits (from "
        "-2**63 to 2**64 - 1) cannot be sent, pickle = true or not: send str(n), and "
        "int(s) where it arrives")


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


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # (numpy's, of matrix)
def test_a_numpy_matrix_is_refused_by_the_safe_codec_and_pickled_as_a_matrix() -> None:
    # It arrived as a plain ndarray without a word, where * multiplies element by
    # element: the program's m * m, a matrix product before, gave another answer.
    import numpy as np

    from polybus.client.naming import content_key
    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call

    m = np.matrix([[1, 2], [3, 4]])
    with pytest.raises(TypeError, match=r"^a numpy matrix cannot be sent by the safe codec: "
                                        r"it would arrive as a plain ndarray, where \* "):
        Codec().encode_parts(Call(0, "f", [m], None))
    assert content_key(m) is None  # (not a cached operand either: it goes by value)
    header, bufs = Codec(allow_pickle=True).encode_parts(Call(0, "f", [m], None))
    back = Codec(allow_pickle=True).decode_value(header, list(bufs))[3][0]  # type: ignore[arg-type]
    assert isinstance(back, np.matrix) and (back * back).tolist() == [[7, 10], [15, 22]]
