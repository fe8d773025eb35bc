"""A time limit (or Ctrl-C) that ends a wait for an aggregated call says where the
program was, as for any call."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_bound_app


def test_a_limit_that_ends_a_wait_for_an_aggregated_call_says_where_it_was(
        tmp_path: Path) -> None:
    """The note of a Ctrl-C or --timeout in a wait asks the call when it was sent; an
    aggregated call's wait (a Slot of its batch) had no answer: AttributeError, and the
    run said "the client raised AttributeError" (found by a review)."""
    app = write_bound_app(tmp_path, server="""
        import time

        def nap(s):
            time.sleep(s)
            return s
    """, client="""
        from polybus import use, wait

        nap = use("nap")

        def main():
            return wait([nap(5.0), nap(5.0)])
    """, names=("nap",), client_keys='use.nap = { callstyle = "async", aggregate = 2 }')
    with pytest.raises(polybus.RunTimeout) as info:
        polybus.run(app, timeout=1.0)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "it was waiting for a call to nap on server-0" in notes, notes
    assert "s after it was sent, not yet answered" in notes, notes
