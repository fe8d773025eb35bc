"""The note on the exception a run ended with that counts the calls still under way
then (client/unseen.py `note_hushed`): one call is "1 call ... was ... its outcome", not
"1 call ... was ... (their outcomes ...)"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client import unseen


@pytest.mark.parametrize(("running", "said"), [
    (1, "1 call the program made was still under way when it ended and went unfinished "
        "(its outcome, a failure included, is not known)"),
    (3, "3 calls the program made were still under way when it ended and went unfinished "
        "(their outcomes, failures included, are not known)"),
])
def test_the_calls_still_under_way_are_counted_in_words_that_agree(
        running: int, said: str) -> None:
    exc = ValueError("bad 3")
    session: Any = SimpleNamespace(batchers=[])  # (no batch: nothing else to say)
    unseen.reset()
    try:
        unseen.note_hushed(exc, session, running)
    finally:
        unseen.reset()
    assert exc.__notes__[0] == said, exc.__notes__
