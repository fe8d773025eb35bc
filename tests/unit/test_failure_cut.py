"""A failure over the frame limit is cut to fit (worker/replies.py, `cut_failure` and
`fitted`): its type kept, the heads of its message and traceback kept, each with a note
of how many characters went; what fits is left as it is."""

from __future__ import annotations

import re

import pytest

from polybus.wire.codec import Codec
from polybus.wire.messages import Deliver, Fail
from polybus.worker.replies import cut_failure, failure_room, fitted

NOTE = re.compile(r" \.\.\. \((\d+) more characters cut: the failure did not fit max_frame\)$")


def head(text: str, whole: str) -> str:
    m = NOTE.search(text)
    assert m is not None, text[-100:]
    kept = text[:m.start()]
    assert whole.startswith(kept) and len(kept) + int(m.group(1)) == len(whole)
    return kept


def utf8(text: str) -> int:
    return len(text.encode())


def test_what_fits_is_left_as_it_is() -> None:
    texts = ["ValueError", "m" * 1000, "tb" * 500]
    got = cut_failure(texts, 3000)
    assert got == texts and all(a is b for a, b in zip(got, texts, strict=True))
    f = Fail(3, "exception", "ValueError", "m", "t")
    assert fitted(f, 100) is f


def test_a_long_message_takes_what_a_short_traceback_leaves() -> None:
    kind, message, tb = cut_failure(["ValueError", "x" * 100_000, "short tb\n"], 10_000)
    assert kind == "ValueError" and tb == "short tb\n"
    assert len(head(message, "x" * 100_000)) > 9_000
    assert utf8(kind) + utf8(message) + utf8(tb) <= 10_000


def test_both_long_share_the_room() -> None:
    kind, message, tb = cut_failure(["E", "m" * 50_000, "t" * 50_000], 10_001)
    assert len(head(message, "m" * 50_000)) > 4_000 and len(head(tb, "t" * 50_000)) > 4_000
    assert utf8(kind) + utf8(message) + utf8(tb) <= 10_001


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_text_beyond_ascii_is_cut_between_characters(char: str) -> None:
    whole = char * 50_000
    kind, message, _ = cut_failure(["E", whole, ""], 10_000)
    assert set(head(message, whole)) == {char}  # (no half character, no replacement)
    assert utf8(kind) + utf8(message) <= 10_000


def test_a_type_name_is_cut_only_past_an_eighth_of_the_room() -> None:
    assert cut_failure(["T" * 100, "m", ""], 1000)[0] == "T" * 100
    kind = cut_failure(["T" * 5000, "m", ""], 8000)[0]
    assert utf8(kind) <= 1000 and len(head(kind, "T" * 5000)) > 0


def test_a_deliver_failure_of_fewer_fields_is_made_whole() -> None:
    assert cut_failure(["LookupError", "evicted"], 1000) == ["LookupError", "evicted", ""]


@pytest.mark.parametrize("limit", [4096, 65_536, 1 << 20])
def test_a_failure_cut_for_a_frame_limit_is_sent_in_one(limit: int) -> None:
    codec = Codec(max_frame=limit)
    message, tb = "x" * (3 * limit), "Traceback\n" + "é" * (2 * limit)
    f = Fail(7, "exception", "server.InputError", message, tb)
    cut = fitted(f, failure_room(limit))
    assert (cut.id, cut.kind, cut.type) == (7, "exception", "server.InputError")
    head(cut.message, message)
    head(cut.traceback, tb)
    codec.encode(cut)  # (no MessageTooLarge)
    # (forwarded: with a consumer's "an upstream call failed: " before it, it fits too)
    codec.encode(Fail(8, "exception", cut.type, "an upstream call failed: " + cut.message,
                      cut.traceback))
    codec.encode(Deliver("k", False, cut_failure([f.type, message, tb], failure_room(limit))))
