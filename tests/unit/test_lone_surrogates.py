"""A str with a lone surrogate in a value the codec encodes (wire/unencodable.py), and
in the text of a failure a replica sends (worker/replies.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from polybus.client.unsendable import named
from polybus.errors import UnsendableError
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Fail, Result
from polybus.wire.unencodable import escaped, lone_surrogate
from polybus.worker.replies import ChildException, failure


@pytest.mark.parametrize("msg", [
    Call(1, "f", ["x\ud800y"]),
    Call(1, "f", [1, ["a", {"k": "x\ud800y"}]]),
    Call(1, "f", [1], {"y": "x\ud800y"}),
    Call(1, "f", [{"x\ud800y": 1}]),
    Result(1, "x\ud800y"),
    Result(1, {"v": ["x\ud800y"]}),
], ids=["arg", "nested", "kwarg", "key", "answer", "nested-answer"])
def test_encoding_one_is_a_type_error_naming_the_character(msg: Any) -> None:
    """msgspec's UnicodeEncodeError (a ValueError, which the send paths take for a
    message too large, not a value to name) is the TypeError every send path takes
    for a value the codec cannot carry; the codec is left usable."""
    codec = Codec()
    for encode in (codec.encode, codec.encode_parts):
        with pytest.raises(TypeError, match=r"^a str with a lone surrogate \(U\+D800\) at "
                                            r"index 1 cannot be sent: ") as info:
            encode(msg)
        assert not isinstance(info.value, UnicodeError)
        assert info.value.__suppress_context__
    assert codec.encode(Result(2, "x\xe9y"))


@pytest.mark.parametrize("text,errors", [("\udcff", "surrogateescape"),
                                         ("ab\udc80", "surrogateescape"),
                                         ("\ud800", "surrogatepass"),
                                         ("x\udfff", "surrogatepass")])
def test_the_hint_names_an_encoding_that_takes_it(text: str, errors: str) -> None:
    """surrogateescape takes only U+DC80..U+DCFF (the bytes it made); surrogatepass
    takes any, so each hint works for the str it is given for."""
    try:
        msgspec.msgpack.encode(text)
    except UnicodeEncodeError as exc:
        said = str(lone_surrogate(exc))
    assert f"s.encode(errors='{errors}')" in said
    assert f"(U+{ord(text[-1]):04X}) at index {len(text) - 1} " in said
    text.encode(errors=errors)  # (it does take it)


def test_a_bare_unicode_encode_error_is_named_as_the_codec_says_it() -> None:
    """The sync lane over shm encodes a call of plain arguments with msgspec itself: its
    UnicodeEncodeError is named as the codec's TypeError would be."""
    try:
        msgspec.msgpack.encode(["ok", "x\ud800y"])
    except UnicodeEncodeError as exc:
        err = named("f", ["ok", "x\ud800y"], None, exc, False)
    assert isinstance(err, UnsendableError)
    assert str(err).startswith("f(...) argument 2: a str with a lone surrogate (U+D800) at "
                               "index 1 cannot be sent: ")


def test_escaped_writes_only_lone_surrogates_as_escapes() -> None:
    plain = "ValueError: bad input"
    assert escaped(plain) is plain
    accented = "caf\xe9 \u4e2d \U0001f600"
    assert escaped(accented) is accented
    assert escaped("bad \udcff char, caf\xe9") == "bad \\udcff char, caf\xe9"


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as got:
        return got


def test_a_failure_with_a_lone_surrogate_in_its_text_can_be_sent() -> None:
    """Type, message and traceback each escaped: the Fail encodes, and says the
    exception (it could not be encoded, and the client was told the function's value
    could not be sent)."""
    class Odd(Exception):
        pass

    Odd.__qualname__ = "Odd\udcff"
    for exc, kind, message in [(ValueError("bad \udcff char"), "ValueError", "bad \\udcff char"),
                               (Odd("m\ud800"), "Odd\\udcff", "m\\ud800")]:
        fail = failure(7, _raised(exc))
        assert (fail.type.rpartition(".")[2], fail.message) == (kind, message)
        assert fail.traceback.endswith(f"{kind}: {message}\n"), fail.traceback
        assert Codec().encode(fail)


def test_a_child_exception_with_a_lone_surrogate_can_be_sent() -> None:
    """A process pool's child sends an exception that does not pickle as text
    (stand_in): that text is escaped too."""
    fail = failure(3, ChildException("E\udcff", "m\udcff", "tb \udcff\n"))
    assert fail == Fail(3, "exception", "E\\udcff", "m\\udcff", "tb \\udcff\n")
    assert Codec().encode(fail)
