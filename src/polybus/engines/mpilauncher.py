"""What the mpi engine knows of its launcher (Open MPI's ``mpiexec``): the job's end as
rank 0's run sees it (`LauncherStopped`, an interruption, as Ctrl-C is), and the
launcher's own stderr, the user's terminal, for what a rank must say there at once."""

from __future__ import annotations

import os

__all__ = ["LauncherStopped", "launcher_stderr"]


class LauncherStopped(KeyboardInterrupt):
    """The launcher is ending the job (Ctrl-C at the terminal, a signal sent to it, or a
    rank that died): rank 0's run is interrupted, as by Ctrl-C. ``lost``: the replicas
    (with their ranks) whose connections closed before, their ranks silent;
    ``starting``: those not registered yet, when it came during the start."""

    def __init__(self, lost: tuple[str, ...] = (), starting: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.lost = lost
        self.starting = starting

    def __str__(self) -> str:
        if not self.lost and self.starting:  # (a rank that dies importing sends nothing)
            return (f"mpiexec ended the job while {', '.join(self.starting)} had not "
                    "started: a rank that dies ends the job, as Ctrl-C or a signal sent "
                    "to mpiexec does")
        if not self.lost:
            return "mpiexec ended the job: Ctrl-C, or a signal sent to mpiexec"
        which = (f"replica {self.lost[0]} was" if len(self.lost) == 1
                 else f"replicas {', '.join(self.lost)} were")
        return (f"mpiexec ended the job, after {which} lost: a rank that dies ends the "
                f"job, as Ctrl-C or a signal sent to mpiexec does")


# Open MPI's launcher on the host it was started on; its stderr is the user's
_LAUNCHERS = ("prterun", "prte", "mpirun", "mpiexec", "orterun")


def launcher_stderr() -> int | None:
    """A descriptor of the launcher's own stderr, if this process's parent is Open MPI's
    launcher (not a daemon on another host, whose stderr is nobody's); else None."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm") as f:
            if f.read().strip() not in _LAUNCHERS:
                return None
        return os.open(f"/proc/{parent}/fd/2", os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError:  # (no /proc: not Linux; or no such descriptor)
        return None
