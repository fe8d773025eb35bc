"""The shelf of shared operand segments: a spare is made ahead for the next operand."""

from __future__ import annotations

import gc

import numpy as np

from polybus.testing.conformance import memfd_mappings
from polybus.transport.shmshare import Shelf, segment_size


def _wait_for_spares(sh: Shelf) -> None:
    for t in list(sh._makers.values()):
        t.join()


def test_a_new_operand_segment_brings_a_warm_spare_for_the_next() -> None:
    sh = Shelf(keep_bytes=64 << 20)
    sh.enter()
    b1 = np.random.default_rng(1).random(1 << 18)  # 2 MiB
    b2 = np.random.default_rng(2).random(1 << 18)
    try:
        s1 = sh.lend("b1", 0, b1, b1.nbytes)
        _wait_for_spares(sh)
        assert sh.held() == 2  # b1's segment and a free spare of its size
        # The next operand, while b1 is still held (as replicas hold the last B when the
        # next round's is copied in), goes into the spare: no third segment.
        s2 = sh.lend("b2", 0, b2, b2.nbytes)
        _wait_for_spares(sh)
        assert s2 is not s1 and s2.seg.size == s1.seg.size == segment_size(b1.nbytes)
        assert sh.held() == 2 and sh.copies == 2
        assert np.array_equal(np.frombuffer(s2.seg.view[:b2.nbytes]), b2)
        sh.give_back(s1)
        sh.give_back(s2)
    finally:
        sh.leave()  # the last channel: free segments (spare included) are closed
    assert sh.held() == 0
    gc.collect()
    assert memfd_mappings() == 0


def test_no_spare_beyond_a_quarter_of_keep_bytes() -> None:
    sh = Shelf(keep_bytes=4 << 20)
    sh.enter()
    try:
        b = np.zeros(1 << 18)  # 2 MiB: its 2 MiB segment is above 4 MiB / 4
        s = sh.lend("b", 0, b, b.nbytes)
        _wait_for_spares(sh)
        assert sh.held() == 1
        sh.give_back(s)
    finally:
        sh.leave()
    gc.collect()
    assert memfd_mappings() == 0


def test_a_spare_still_being_made_when_the_last_channel_closes_is_closed() -> None:
    sh = Shelf(keep_bytes=64 << 20)
    sh.enter()
    b = np.zeros(1 << 20)  # 8 MiB
    s = sh.lend("b", 0, b, b.nbytes)
    sh.give_back(s)
    sh.leave()  # waits for the maker, which sees no channel left and closes its spare
    assert not sh._makers and sh.held() == 0
    gc.collect()
    assert memfd_mappings() == 0


def test_spares_count_toward_the_segment_cap() -> None:
    sh = Shelf(keep_bytes=64 << 20)
    sh.max_segments = 2
    sh.enter()
    ops = [np.full(1 << 17, float(i)) for i in range(3)]  # 1 MiB each
    try:
        s0 = sh.lend("b0", 0, ops[0], ops[0].nbytes)
        _wait_for_spares(sh)
        assert sh.held() == 2  # its segment and the spare: the cap, no more spares
        s1 = sh.lend("b1", 0, ops[1], ops[1].nbytes)  # into the spare
        _wait_for_spares(sh)
        assert s1 is not None and sh.held() == 2
        # both held: a third operand finds no segment, and its value goes in the frame
        assert sh.lend("b2", 0, ops[2], ops[2].nbytes) is None
        assert s0 is not None
        sh.give_back(s0)
        sh.give_back(s1)
    finally:
        sh.leave()
    assert sh.held() == 0
    gc.collect()
    assert memfd_mappings() == 0


def test_a_spare_being_made_counts_toward_the_cap_from_the_start() -> None:
    # The cap bounds descriptors: a spare still being made (its memfd open, pages being
    # touched) is one of them, so an operand that comes meanwhile finds the cap reached.
    import os
    import threading

    from polybus.transport import shmshare

    def memfds() -> int:
        """Segments open in this process (each has two descriptors: its own, mmap's)."""
        inodes = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                if "memfd:polybus-shm" in os.readlink(f"/proc/self/fd/{fd}"):
                    inodes.add(os.stat(f"/proc/self/fd/{fd}").st_ino)
            except OSError:
                pass
        return len(inodes)

    made, go = threading.Event(), threading.Event()

    class SlowSpare(shmshare.Segment):
        def __init__(self, seg_id: int, size: int, populate: bool = False) -> None:
            super().__init__(seg_id, size, populate)
            if populate:  # the spare: hold it here, made, until the test has looked
                made.set()
                go.wait(30)

    sh = Shelf(keep_bytes=64 << 20)
    sh.max_segments = 2
    before = memfds()
    real = shmshare.Segment
    shmshare.Segment = SlowSpare  # type: ignore[misc]
    ops = [np.full(1 << 17, float(i)) for i in range(2)]  # 1 MiB each
    sh.enter()
    try:
        s0 = sh.lend("b0", 0, ops[0], ops[0].nbytes)
        assert s0 is not None and made.wait(30)
        s1 = sh.lend("b1", 0, ops[1], ops[1].nbytes)  # b0's segment and the spare: the cap
        assert memfds() - before <= sh.max_segments
        assert s1 is None
        go.set()
        _wait_for_spares(sh)
        assert sh.held() == 2
        sh.give_back(s0)
    finally:
        go.set()
        shmshare.Segment = real  # type: ignore[misc]
        sh.leave()
    assert sh.held() == 0 and memfds() == before
    gc.collect()
    assert memfd_mappings() == 0
