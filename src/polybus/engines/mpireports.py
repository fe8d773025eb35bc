"""What the mpi engine's ranks tell rank 0 of their replicas, as MPI messages.

A rank whose replica could not start, or stopped while serving (a thread of its worker
ended by an exception: worker/runtime.py), sends rank 0 its error line (``TAG_FAILED``)
and stays in the job until rank 0's stop: a rank that left it without MPI's finalize
would have the launcher end the whole job. Rank 0 raises a failed start
(`MpiEngine._wait_ready`); from then on a thread of its own takes each report as it
comes (`Reports.watch`), says it at once (``polybus: warning: worker server-1 (mpi rank
2) stopped: ...``) and keeps it for the run: the replica's loss says how its worker ended
(`how_ended`, as the local engine says an exit status; waited for off the client's
reactor path: client/lossline.py) and a run that fails names it (`ended`). The rest of
the run goes on as when a local worker is lost: its calls go to the replicas left, or
fail when none is. Reports are also taken while rank 0 waits at
the last barrier, so no rank is held in its send (a report too large for MPI's eager
send waits for its receive).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["HOW_S", "TAG_FAILED", "Reports", "stopped_text"]

log = logging.getLogger("polybus.engine")

TAG_FAILED = 7101  # a rank's replica could not start, or stopped: its error, to rank 0
_POLL_S = 0.02  # how often rank 0 looks for a report (a blocking MPI wait spins a CPU)
# For a rank's report to come once its replica's connection closed (it sends it as
# its worker stops, a moment after the connections close): `how_ended`
HOW_S = 0.5


def stopped_text(name: str, why: str) -> str:
    """What became of replica ``name`` whose rank reported ``why`` (its error line:
    ``worker NAME stopped: ...`` from worker/main.py), from its verb on: "stopped: ..."."""
    lead = f"worker {name} "
    return why[len(lead):] if why.startswith(f"{lead}stopped: ") else f"stopped: {why}"


class Reports:
    """Rank 0's: the reports of the ranks in ``names`` (rank -> replica name)."""

    def __init__(self, comm: Any, mpi: Any, names: dict[int, str]) -> None:
        self.comm = comm
        self.mpi = mpi
        self.names = names
        self.stopped: dict[str, str] = {}  # "(mpi rank N) stopped: ...", by replica name
        self._watching = False  # reports now are of replicas that stopped while serving
        self._end = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self) -> list[tuple[int, str]]:
        """Every report here now: (rank, error line), in the order they came."""
        out = []
        status = self.mpi.Status()
        while (msg := self.comm.improbe(source=self.mpi.ANY_SOURCE, tag=TAG_FAILED,
                                        status=status)) is not None:
            rank = status.Get_source()
            out.append((rank, str(msg.recv())))
        return out

    def watch(self) -> None:
        """From now on (every replica serves) take each report as it comes, from a
        thread of its own, until `unwatch`."""
        self._watching = True
        self._thread = threading.Thread(target=self._loop, name="polybus-mpi-reports",
                                         daemon=True)
        self._thread.start()

    def unwatch(self) -> None:
        """The thread ends (returns once it has); reports are taken by `settle` then."""
        self._end.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def settle(self) -> None:
        """Take the reports here now (the last barrier's wait: each rank that sends one
        goes on once it is received)."""
        for rank, why in self.take():
            self._note(rank, why)

    def _loop(self) -> None:
        while not self._end.wait(_POLL_S):
            try:
                self.settle()
            except Exception:  # (the thread must not end: the run would not hear of one)
                log.exception("polybus: could not take the mpi ranks' reports")

    def _note(self, rank: int, why: str) -> None:
        name = self.names.get(rank, "?")
        if not self._watching:  # (another's start failed first, and rank 0 raised that
            # one: taken only so this rank goes on to the barrier, as the local engine
            # says the first worker that could not start alone)
            log.debug("worker %s (mpi rank %d) could not start either: %s", name, rank, why)
            return
        said = stopped_text(name, why)
        self.stopped[name] = f"(mpi rank {rank}) {said}"
        log.warning("polybus: warning: worker %s (mpi rank %d) %s", name, rank, said)

    def said(self, name: str) -> str | None:
        """How replica ``name`` ended, if its rank's report is here now; else None."""
        return self.stopped.get(name)

    def how_ended(self, name: str, settle: float = HOW_S) -> str | None:
        """How replica ``name`` ended ("(mpi rank 2) stopped: its thread ... ended by
        ..."), waiting up to ``settle`` s for its rank's report; None if there is none."""
        deadline = time.monotonic() + settle
        while (name not in self.stopped and self._thread is not None
               and name in self.names.values() and time.monotonic() < deadline):
            time.sleep(_POLL_S)
        return self.stopped.get(name)

    def ended(self, settle: float = 0.0) -> list[str]:
        """One line for each replica whose rank reported it stopped, waiting up to
        ``settle`` s for a first report when there is none yet."""
        deadline = time.monotonic() + settle
        while not self.stopped and self._thread is not None and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        return [f"worker {name} {how}" for name, how in list(self.stopped.items())]
