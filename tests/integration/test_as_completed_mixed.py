"""polybus.as_completed over promises of several kinds: aggregated calls and single
ones."""

from __future__ import annotations

from pathlib import Path

import polybus

from .comm_harness import cluster
from .test_as_completed import TOML


def test_batches_and_single_calls_mixed_each_come_once_in_answer_order(tmp_path: Path) -> None:
    toml = TOML.format(agg=', aggregate = 2')
    with cluster(tmp_path, toml, replicas=2) as c:
        s = c.session()
        slow = s.call("nap", ("slow", 1.5), {})
        batch = [s.call("scale", (i, 2), {}) for i in range(4)]  # (two batches of two)
        quick = s.call("nap", ("quick", 0.0), {})
        given = [slow, *batch, quick]
        got = list(polybus.as_completed(given))
        assert len(got) == 6 and {id(p) for p in got} == {id(p) for p in given}
        assert got[-1] is slow
        assert sorted(polybus.wait(p) for p in got[:-1] if p is not quick) == [0, 2, 4, 6]



def test_a_promise_given_twice_comes_once(tmp_path: Path) -> None:
    # As concurrent.futures.as_completed does (it takes a set): the same promise twice
    # came twice, an iteration over answers counting one answer as two. A value that
    # is not a promise comes each time it is given, at once.
    with cluster(tmp_path, TOML.format(agg=""), replicas=2) as c:
        s = c.session()
        q = s.call("nap", ("q", 0.0), {})
        r = s.call("nap", ("r", 0.0), {})
        got = list(polybus.as_completed([q, 7, r, q, 7]))
        assert [x for x in got if x == 7] == [7, 7]
        assert sorted(id(p) for p in got if p is q or p is r) == sorted([id(q), id(r)])
        assert sorted(polybus.wait(p) for p in got if p is q or p is r) == ["q", "r"]
