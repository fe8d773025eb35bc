"""What docs/configuration.md says the safe codec converts ("Values the safe codec
converts") is what it does: each row's value, sent through the codec, arrives as the row
says, with pickle off and on (where the doc says which arrive as themselves instead). (The doc said every value the safe codec cannot carry
fails the call; datetimes, Decimals, UUIDs and complex numbers arrived converted.)"""

from __future__ import annotations

import datetime
import decimal
import enum
import re
import uuid
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polybus.wire.codec import Codec
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import Call

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


class Color(enum.Enum):
    RED = 1


@dataclass
class Point:
    x: int
    y: int


Pair = namedtuple("Pair", "a b")

# What arrives as itself with pickle on, as the paragraph above the table says
PICKLED = (complex, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal,
           uuid.UUID, enum.Enum, Point)

# What the table's expressions may name (the classes as the table describes them).
NAMES = {"datetime": datetime, "decimal": decimal, "uuid": uuid, "Color": Color,
         "Point": Point, "Pair": Pair, "numpy": np}


def rows() -> list[tuple[str, str]]:
    """(sent, arrives as): the first `code` of each cell of the section's table."""
    text = DOC.read_text()
    section = text.split("### Values the safe codec converts", 1)[1].split("\n### ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = line.strip().strip("|").split("|")
        codes = [re.search(r"`([^`]+)`", c) for c in cells]
        if len(cells) == 2 and codes[0] and codes[1] and not line.startswith("|---"):
            out.append((codes[0].group(1), codes[1].group(1)))
    return out


def through(value: Any, pickle: bool) -> Any:
    """``value`` as a call's argument arrives at a replica with ``pickle`` on both ends."""
    pieces = Codec(allow_pickle=pickle).encode(Call(1, "f", [value]))
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
    frame = d.next_frame()
    assert frame is not None
    msg = Codec(allow_pickle=pickle).decode(frame)
    assert isinstance(msg, Call)
    return msg.args[0]


def test_the_table_has_a_row_for_each_converted_type() -> None:
    sent = {type(eval(s, NAMES)) for s, _ in rows()}
    assert {datetime.datetime, datetime.date, datetime.time, datetime.timedelta,
            decimal.Decimal, uuid.UUID, complex, Color, Point, Pair, bytearray,
            np.float32} <= sent


@pytest.mark.parametrize(("sent", "arrives"), rows(), ids=[s for s, _ in rows()])
def test_each_row_is_what_the_codec_does(sent: str, arrives: str) -> None:
    value, expected = eval(sent, NAMES), eval(arrives, NAMES)
    got = through(value, pickle=False)
    assert type(got) is type(expected) and repr(got) == repr(expected)
    # With pickle on, the same, but what the doc names is pickled and arrives as itself.
    if isinstance(value, PICKLED):
        got = through(value, pickle=True)
        assert type(got) is type(value) and repr(got) == repr(value)
    else:
        assert repr(through(value, pickle=True)) == repr(expected)


def test_what_the_rows_say_in_words() -> None:
    utc = datetime.datetime(2024, 5, 6, 7, 8, tzinfo=datetime.UTC)
    assert repr(through(utc, pickle=False)) == repr(utc)  # "arrives exactly as sent"
    assert through(np.complex128(1 + 2j), pickle=False) == [1.0, 2.0]
    assert through(memoryview(b"ab"), pickle=False) == b"ab"
    got = through(np.uint8(7), pickle=False)  # "numpy.uint8(7)": a Python int
    assert type(got) is int and got == 7
    assert repr(through(np.array(2.5), pickle=False)) == "array(2.5)"  # "a 0-d array ..."
    with pytest.raises(OverflowError):  # "an int outside -2**63 .. 2**64-1, pickle or not"
        through(2**64, pickle=True)
    with pytest.raises(TypeError):
        through(Path("/"), pickle=False)
