"""Before a large answer goes back: read what its client sent while the call ran.

An answer of FORWARD_MIN or more (forwarding.py) is worth keeping off the client, so
before it is sent its replica reads the client's connection (`heed`), and a Forward or
Keep the client asked meanwhile sends it on (or keeps it) rather than answering it by
value. Reading takes the poller role (runtime.py). Another thread holding it is woken
and its turn waited for, no idle thread taking the role meanwhile: that thread may have
read the Forward and not yet handled it, or not read it at all. (Before, `heed` read
nothing then, and a 1.6 MB answer whose Forward was written before it finished went to
the client in 1 run of 6 on a pool of 2: test_forward_heed.)
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.transport.channel import Channel
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["HEED_WAIT_S", "heed"]

log = logging.getLogger("polybus.worker")
# At most this long for another thread's poll turn; then answered as it is (whoever
# polls reads the Forward after the answer, which goes to the client by value).
HEED_WAIT_S = 1.0


def heed(rt: WorkerRuntime, ch: Channel) -> None:
    """Read what ``ch``'s client sent while the call ran, the poller role taken for it
    (from another thread once its turn ends), unless ``ch`` is not read now."""
    took = False  # (the role from another thread: given back to an idle one after)
    with rt._lock:
        if rt._polling and not rt._stopping:
            end = time.monotonic() + HEED_WAIT_S
            rt._heeding += 1
            try:
                rt._wake()  # (its sleep in the selector cut short: once is enough)
                while rt._polling and not rt._stopping:
                    left = end - time.monotonic()
                    if left <= 0:
                        return
                    # Every end of a turn tells the threads heeding (`WorkerRuntime.
                    # _let_role_go`, on their own condition: the idle pool threads sleep
                    # on), and none takes the role while one heeds.
                    rt._heed_cv.wait(left)
            finally:
                rt._heeding -= 1
            took = True
        if ch.closed or ch in rt._paused or ch in rt._stuck or rt._stopping:
            if took:
                rt._cv.notify()
            return
        rt._polling = True
    try:
        rt._read(ch)
    except BaseException:  # (as the poller's: a fault here must not lose the answer)
        log.exception("worker %s: reading %s before an answer failed", rt.name, ch.peer)
    finally:
        with rt._lock:
            rt._let_role_go()  # (another thread heeding takes it next)
            if took or (len(rt._queue) and rt._running < rt.options.pool):
                rt._cv.notify()  # someone polls again; calls it read wait for a thread
