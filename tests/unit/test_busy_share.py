"""runner.busy_share: the share of a replica's handlers' time spent in calls."""

from __future__ import annotations

import pytest

from polybus.runner import busy_share


@pytest.mark.parametrize(("busy", "elapsed", "handlers", "share"), [
    (0.5, 1.0, 1, 0.5),
    (1.2, 1.0, 2, 0.6),  # (a pool's overlapping calls: of its two handlers)
    (0.0, 0.0, 1, 0.0),  # (no time: nothing to share)
    # A replica shared with another client counts that client's calls in full, one
    # begun before this run too: 1.05 s of calls in a 1 s run showed as 105 busy %.
    (1.05, 1.0, 1, 1.0),
    (3.0, 1.0, 2, 1.0),
])
def test_busy_share(busy: float, elapsed: float, handlers: int, share: float) -> None:
    assert busy_share(busy, elapsed, handlers) == pytest.approx(share)
