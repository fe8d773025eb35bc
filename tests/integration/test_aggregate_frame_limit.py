"""An aggregated call over the frame limit (``max_frame``) fails alone, with the error
an unaggregated call gets, and the calls batched with it are answered."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import polybus
from polybus.errors import MessageTooLarge

from .comm_harness import cluster
from .test_aggregate_counts_refused import TOML as AGGREGATING

# (the aggregating echo app of test_aggregate_counts_refused, with a small frame limit)
TOML = AGGREGATING + """
[cluster]
max_frame = "1MiB"
"""


@pytest.mark.timeout(60)
def test_a_call_over_the_frame_limit_fails_alone_in_its_batch(tmp_path: Path) -> None:
    # A str of 2 MB goes the lean way (only bytes of 64 KiB or more do not): its batch
    # could not be written, and MessageTooLarge came out of the next call, made by the
    # program on another value, while the big call's promise was never answered.
    with cluster(tmp_path, TOML) as c:
        s = c.session()
        ps = [s.call("echo", ("x" * (2 << 20) if i == 1 else i,), {}) for i in range(4)]
        with pytest.raises(MessageTooLarge, match=r"^echo\(\.\.\.\): the call's message of "
                           r"\d+ bytes is over the frame limit.*max_frame"):
            polybus.wait(ps[1])
        assert [polybus.wait(p) for p in (ps[0], ps[2], ps[3])] == [0, 2, 3]
        assert polybus.wait(s.call("echo", (9,), {})) == 9  # (the replica serves on)
        counts = s.stats().interfaces["client.echo"]
        assert counts["batched_calls"] == 4 and c.runtimes[0].calls == 4


@pytest.mark.timeout(60)
def test_a_batch_over_the_frame_limit_fails_each_call_saying_why(tmp_path: Path) -> None:
    # Each call a list of two strs of 200 KB: about 400 KB alone, within the 1 MiB
    # limit, four together are not. Their sizes are guessed at 9 bytes a list item, so
    # the four made one batch, which could not be written: MessageTooLarge came out of
    # the program's fourth call, saying nothing of a batch, and no call was answered.
    with cluster(tmp_path, TOML) as c:
        s = c.session()
        rows = [[str(i) * (200 << 10), "y" * (200 << 10)] for i in range(4)]
        ps = [s.call("echo", (row,), {}) for row in rows]
        for p in ps:
            with pytest.raises(MessageTooLarge, match=r"^echo\(\.\.\.\): a batch of 4 calls "
                               r"with this one was over the frame limit, though each call "
                               r"fits .*aggregate fewer calls \(use\.echo\.aggregate"):
                polybus.wait(p)
        assert polybus.wait(s.call("echo", (rows[0],), {})) == rows[0]  # (alone, it goes)
        counts = s.stats().interfaces["client.echo"]
        assert (counts["batches"], counts["batched_calls"]) == (1, 1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rows", ["one-too-large", "too-large-together"])
def test_a_batch_the_linger_timer_cannot_write_fails_its_calls(tmp_path: Path,
                                                               rows: str) -> None:
    # Written by the linger timer, not by a call of the program: the timer took the
    # MessageTooLarge for a dead connection and dropped it, and the batch's calls were
    # never answered.
    with cluster(tmp_path, TOML.replace('"30s"', '"20ms"')) as c:
        s = c.session()
        args: list[tuple[object, ...]]
        if rows == "one-too-large":
            args = [("x" * (2 << 20) if i == 1 else i,) for i in range(3)]
        else:
            args = [([str(i) * (200 << 10), "y" * (200 << 10)],) for i in range(3)]
        ps = [s.call("echo", a, {}) for a in args]
        (bt,) = s.batchers
        end = time.monotonic() + 20
        while bt.unwritten and time.monotonic() < end:  # (the timer writes it)
            time.sleep(0.005)
        assert not bt.unwritten
        with pytest.raises(MessageTooLarge, match=r"^echo\(\.\.\.\): "):
            polybus.wait(ps[1], timeout=20)
        if rows == "one-too-large":
            assert polybus.wait([ps[0], ps[2]], timeout=20) == [0, 2]
        assert polybus.wait(s.call("echo", (9,), {}), timeout=20) == 9


CACHING = """
[modules.server]
source = "server.py"
define.held = { cache = ["b"] }

[modules.client]
source = "client.py"
entrypoint = "main"
use.held = { callstyle = "async", aggregate = 8, linger = "30s" }

[bind]
"client.held" = "server.held"

[cluster]
max_frame = "1MiB"
"""


@pytest.mark.timeout(60)
def test_calls_with_a_cached_operand_batch_within_the_frame_limit(tmp_path: Path) -> None:
    # Each call a row of 200 KB, sent by value, and b, cached (sent once, then named):
    # with operand caching a batch was not sized at all (its cached operands, counted
    # whole, would have made every batch one call), so eight rows made a batch of
    # 1.6 MB, and every call failed with MessageTooLarge; unaggregated, each went.
    import numpy as np

    b = np.ones(1000)
    with cluster(tmp_path, CACHING) as c:
        s = c.session()
        rows = [np.full(25_000, float(i)) for i in range(8)]
        ps = [s.call("held", (row, b), {}) for row in rows]
        got = [polybus.wait(p) for p in ps]
        assert [ro for ro, _ in got] == [True] * 8  # (b named, read-only at the replica)
        counts = s.stats().interfaces["client.held"]
        assert counts["batched_calls"] == 8 and counts["batches"] >= 2
        assert counts["operands_put"] == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rows", ["one-too-large", "too-large-together"])
def test_with_a_cached_operand_a_call_or_batch_over_the_limit_fails_saying_why(
        tmp_path: Path, rows: str) -> None:
    # As the first two tests, with b cached: MessageTooLarge came out of the program's
    # call that wrote the batch ("message of 1638638 bytes is over the frame limit"),
    # saying nothing of which call or of a batch, and no call of it was answered.
    import numpy as np

    b = np.ones(1000)
    with cluster(tmp_path, CACHING.replace("aggregate = 8", "aggregate = 4")) as c:
        s = c.session()
        if rows == "one-too-large":
            args = ["x" * (2 << 20) if i == 1 else str(i) for i in range(4)]
            ps = [s.call("held", (a, b), {}) for a in args]
            with pytest.raises(MessageTooLarge, match=r"^held\(\.\.\.\): the call's message "
                               r"of \d+ bytes is over the frame limit.*max_frame"):
                polybus.wait(ps[1])
            assert [polybus.wait(p)[0] for p in (ps[0], ps[2], ps[3])] == [True] * 3
        else:
            lists = [[str(i) * (200 << 10), "y" * (200 << 10)] for i in range(4)]
            ps = [s.call("held", (row, b), {}) for row in lists]
            for p in ps:
                with pytest.raises(MessageTooLarge, match=r"^held\(\.\.\.\): a batch of 4 "
                                   r"calls with this one was over the frame limit, though "
                                   r"each call fits .*aggregate fewer calls"):
                    polybus.wait(p)
        assert polybus.wait(s.call("held", ("z", b), {}))[0]  # (the replica serves on)



@pytest.mark.timeout(60)
def test_calls_passing_one_cached_operand_twice_batch_together(tmp_path: Path) -> None:
    # held(a, a), a of 600 KB and cached at both places: the frame carries two names of
    # it, a few bytes. Its size left a out once and counted it once still: each call was
    # over half the frame limit, so each went in a batch of its own (8 of 1, not 1 of 8).
    import numpy as np

    a = np.ones(75_000)
    with cluster(tmp_path, CACHING.replace('cache = ["b"]', 'cache = ["row", "b"]')) as c:
        s = c.session()
        ps = [s.call("held", (a, a), {}) for _ in range(8)]
        assert [polybus.wait(p)[0] for p in ps] == [True] * 8  # (named at the replica)
        counts = s.stats().interfaces["client.held"]
        assert (counts["batches"], counts["batched_calls"]) == (1, 8)
        assert counts["operands_put"] == 1
