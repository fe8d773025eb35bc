"""What a client session says of a replica it lost: one warning line, once a name
(``polybus: warning: replica server-1 of module 'server' was lost: ...``), ending with
how the replica's worker ended when the engine that started it can tell. Once a name,
until it is dialled again (`LossLines.again`: the front door gets its lost replicas
back, http/revival.py): a name lost again after that, its worker started again in
between, is said again, with how that worker ended; but not a connection of the name
dialled before that (a binding's other transport, not read since the worker went):
that worker's loss was said.

A loss is heard on the reactor's path: the thread that reads every connection, which
every other call waits on (an event loop's, under the front door). Nothing here waits
there. An engine that knows at once (`Cluster.how_ended`: the local engine, from the
worker's exit status) has the line said with the loss, before its calls are handed on.
One whose word comes a moment after the connection closed (`Cluster.how_ended_later`:
an mpi rank's report, Ray's answer about its actor, the local engine's worker reaped
after the quick look's 50 ms on a loaded machine) is asked on a thread of its own,
and the line is said when the word comes, or when its wait ends without it; the calls
go on meanwhile. (The session waited on the reactor's path, up to 0.5 s for a report
that may never come, at every such loss: under mpi, for a replica the launcher was
ending as it ended rank 0, past the SIGKILL that followed, and the run's last line
was never said.) A session that closes while a line waits waits for it too, unless
the run was interrupted (Ctrl-C, the mpi launcher ending the job, a time limit): the
line is said then with what is known.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

from polybus.errors import PolybusError

__all__ = ["CLOSE_S", "HowEnded", "LossLines"]

log = logging.getLogger("polybus.client")

HowEnded = Callable[[str], str | None]  # replica name -> how its worker ended, or None
# The longest a closing session waits for the engine's word on its lost replicas (each
# engine's own bound is shorter: 0.5 s under mpi and Ray); a line still waiting then
# is said without it
CLOSE_S = 2.0


def _why(error: PolybusError) -> str:
    why = (str(error).splitlines() or [type(error).__name__])[0]
    if getattr(error, "heartbeat", None) is not None:  # (not a closed connection)
        why += ("; its process may be alive, in a call that holds the GIL: raise "
                "cluster.heartbeat for such calls; or cut off from this host by the "
                "network (docs/reliability.md)")
    return why


class LossLines:
    """A session's loss lines. ``how_ended``: what the engine knows at once (asked on
    the reactor's path); ``how_ended_later``: its word, waited for (asked on a thread
    of its own when ``how_ended`` had nothing). Either may be None."""

    def __init__(self, how_ended: HowEnded | None = None,
                 how_ended_later: HowEnded | None = None) -> None:
        self.how_ended = how_ended
        self.how_ended_later = how_ended_later
        # By replica name, how the worker of each lost one ended, where the engine said
        # (the front door says it in the 502 of a request that finds it gone:
        # http/revival.py); an earlier end of that name goes once it is dialled again.
        self.ended: dict[str, str] = {}
        self._heard: set[str] = set()  # names whose loss was heard (said once, until
        #                                dialled again: `again`)
        # By name, how often it was dialled again after its loss was heard: a connection
        # of an earlier dialling (`dialling`), lost after that, is of the worker whose
        # loss was said (a binding's other transport, not read meanwhile)
        self._dialled: dict[str, int] = {}
        # Names whose loss was heard and that were not dialled again themselves since
        # (another worker in their place is not their coming back)
        self._away: set[str] = set()
        # Each loss heard, by its number: (name, module, why) of those unsaid; and the
        # number of each name's latest loss (only its word is kept in `ended`)
        self._waiting: dict[int, tuple[str, str, str]] = {}
        self._latest: dict[str, int] = {}
        self._numbers = itertools.count()
        self._threads: list[threading.Thread] = []  # (those asking how_ended_later)
        self._lock = threading.Lock()
        self._closed = False  # (a loss heard after `close`: said at once)

    def lost(self, name: str, module: str, error: PolybusError,
             dialling: int | None = None) -> None:
        """Replica ``name`` of ``module`` was lost with ``error``: its line said now, or
        once the engine's word comes (never waited for here). ``dialling``: that of the
        connection lost (`dialling`); one earlier than the name's is of a worker whose
        loss was said, and dialled again since: not said again."""
        with self._lock:
            if name in self._heard or (dialling is not None
                                       and dialling < self._dialled.get(name, 0)):
                return
            self._heard.add(name)
            self._away.add(name)
            number = self._latest[name] = next(self._numbers)
        why = _why(error)
        how = self.how_ended(name) if self.how_ended is not None else None
        if how is not None or self.how_ended_later is None or self._closed:
            self._say(number, name, module, why, how)
            return
        with self._lock:
            closed = self._closed  # (closed meanwhile: no one else would say it)
            if not closed:
                self.ended.pop(name, None)
                self._waiting[number] = (name, module, why)
        if closed:
            self._say(number, name, module, why, how)
            return
        thread = threading.Thread(target=self._later, args=(number, name),
                                  name=f"polybus-loss-{name}", daemon=True)
        thread.start()  # (then listed: `close` joins none not started)
        # (those ended let go: a name lost and dialled again over and over, in a
        # long-lived front door, kept one more at each loss)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def again(self, name: str, itself: bool = True) -> bool:
        """Replica ``name`` was dialled again (a worker answering again, or one started
        in its place: not ``itself``): its next loss is said, with how that worker
        ended; how the earlier one ended is past. True the first time since its loss
        was heard (its other connections, a binding's other transport, dialled again
        after: False); ``itself``, the first time the worker of that name is (another
        worker that took a place of its meanwhile is not its coming back)."""
        with self._lock:
            heard = name in self._heard
            if heard:
                self._dialled[name] = self._dialled.get(name, 0) + 1
            self._heard.discard(name)
            self._latest.pop(name, None)
            self.ended.pop(name, None)
            if not itself:
                return heard
            back = name in self._away
            self._away.discard(name)
        return back

    def dialling(self, name: str) -> int:
        """How often ``name`` was dialled again after a loss heard: a connection's own
        (``ReplicaLink.dialling``), given to `lost` when it is lost."""
        with self._lock:
            return self._dialled.get(name, 0)

    def _later(self, number: int, name: str) -> None:
        assert self.how_ended_later is not None
        try:
            how = self.how_ended_later(name)
        except Exception:  # (the engine going meanwhile: the line is said all the same)
            log.debug("could not learn how worker %s ended", name, exc_info=True)
            how = None
        with self._lock:
            waiting = self._waiting.pop(number, None)
        if waiting is not None:  # (None: said at close meanwhile)
            self._say(number, *waiting, how)

    def close(self, wait: bool = True) -> None:
        """The lines still waiting for the engine's word said: once it comes (within
        `CLOSE_S` in all), or, without ``wait``, at once, with what it knows now; so too
        when a stop signal ends that wait (under mpi, the launcher's, a rank having died:
        its report never comes), before the interruption goes on."""
        try:
            if wait:
                deadline = time.monotonic() + CLOSE_S
                for thread in list(self._threads):
                    thread.join(max(0.0, deadline - time.monotonic()))
        finally:
            self._say_waiting()

    def _say_waiting(self) -> None:
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, {}
        for number, (name, module, why) in waiting.items():
            how = self.how_ended(name) if self.how_ended is not None else None
            self._say(number, name, module, why, how)

    def _say(self, number: int, name: str, module: str, why: str, how: str | None) -> None:
        with self._lock:
            if self._latest.get(name) == number:  # (not an earlier worker's, said late)
                if how is not None:
                    self.ended[name] = how
                else:
                    self.ended.pop(name, None)
        if how is not None:  # (the signal, status or report, from the engine)
            why += f"; its worker {how}"
        log.warning("polybus: warning: replica %s of module %r was lost: %s", name, module,
                    why)
