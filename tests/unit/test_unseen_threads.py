"""The count of failed calls the program never looked at (client/unseen.py), said in one
note when the program's exception ends the run, while several program threads raise the
same failed promise's error at once: the error is counted seen once."""

from __future__ import annotations

import sys
import threading
from types import SimpleNamespace
from typing import Any

from polybus.client import unseen
from polybus.errors import RemoteError

ERRORS = 20_000  # per round
ROUNDS = 4


def test_an_error_two_threads_raise_at_once_is_counted_seen_once() -> None:
    """Two threads using one failed promise each raise its error (`raised`, then `seen`):
    each looked whether it was seen, then counted and marked it, and the GIL could pass
    between the look and the mark (a short switch interval makes it pass often: a few
    errors in 20,000 counted seen twice, most rounds). Counted twice, it stood for
    another error of its type that no one looked at: the run's note ("3 more calls failed
    the same way (RemoteError), never looked at") left that one out."""
    before = sys.getswitchinterval()
    unseen.reset()
    try:
        never_looked_at = RemoteError("no one waits for this one")
        unseen.failed(never_looked_at)
        for _ in range(ROUNDS):
            errors = [RemoteError(f"boom {i}") for i in range(ERRORS)]
            for e in errors:
                unseen.failed(e)

            def use(errors: list[RemoteError] = errors) -> None:
                for e in errors:
                    unseen.raised(e)

            sys.setswitchinterval(1e-6)
            try:
                threads = [threading.Thread(target=use) for _ in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(120.0)
            finally:
                sys.setswitchinterval(before)
            assert not any(t.is_alive() for t in threads)
        exc = RemoteError("the program's own")
        session: Any = SimpleNamespace(batchers=[])  # (no batch: nothing else to say)
        unseen.note_hushed(exc, session)
    finally:
        unseen.reset()
    assert getattr(exc, "__notes__", []) == [
        "1 more call failed the same way (RemoteError), never looked at before the run "
        "ended"]
