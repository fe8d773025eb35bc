"""What the error of a call lost with its replicas adds: why they were taken for dead
(`silence_note`), and, for a call that was running on each replica that went, whether
it may be what ends them or they were ended from outside it (`suspect_note`, from how
each worker ended as its engine says: `outside`)."""

from __future__ import annotations

from polybus.client.calls import define_key
from polybus.errors import ConnectionLostError

__all__ = ["mark_outside", "outside", "silence_note", "suspect_note"]


def silence_note(error: object) -> str:
    """What a loss adds when the replica was taken for dead for its silence (``error``
    a ConnectionLostError with its ``heartbeat``), not for a closed connection: why, and
    the key that changes it. Empty for any other loss."""
    beat = getattr(error, "heartbeat", None)
    if beat is None:
        return ""
    return (f"; a replica that answers no Ping for 3 heartbeats ({3 * beat:g} s) is taken "
            "for dead while its process may be alive, as one running a call that holds the "
            "GIL that long (a single C call that does not release it: a pure-Python loop lets "
            "the Ping through) is: raise cluster.heartbeat "
            f"(now {beat:g} s) above such a call's time, e.g. --set cluster.heartbeat="
            f"{max(10, int(beat * 10)):d}; or as one cut off from this host by the network "
            "is (docs/reliability.md, \"A replica cut off by the network\")")


# How a worker ends when a stop signal comes from outside its calls: by the signal, or
# (an engine's worker, whose SIGTERM is a clean end: worker/main.py) with status 0.
_STOPPED = ("(SIGTERM)", "(SIGINT)", "(SIGHUP)", "exited with status 0")


def outside(how: str | None) -> str:
    """Of how a worker ended, as its engine says it (`Engine.how_ended`): "killed" by
    SIGKILL, "stopped" by a stop signal (or the clean end it makes of one), both from
    outside any call; "" otherwise, or not known."""
    if how is None:
        return ""
    if how.endswith("(SIGKILL)"):
        return "killed"
    return "stopped" if how.endswith(_STOPPED) else ""


def mark_outside(error: ConnectionLostError, hows: list[str | None]) -> None:
    """``error``, the loss of a replica whose module's replicas lost so far ended as
    ``hows`` say (its own first: `outside` of it is not ""): ``killed`` if each was by
    SIGKILL, else ``stopped`` if each was ended from outside any call."""
    said = [outside(h) for h in hows]
    error.killed = all(h == "killed" for h in said)
    error.stopped = not error.killed and all(said)


def suspect_note(interface: str, attempts: int, error: object = None, module: str = "") -> str:
    """What "every replica is gone" adds: why, when its replicas were taken for dead for
    their silence (`silence_note`); and for a call that was running on each replica that
    went (it was re-run after each loss) that it was, and the key that stops the re-runs
    (``module``: the serving module's key, for the whole key): that it may be what ends
    them, unless each was killed by SIGKILL (``error.killed``, client/session.py) or
    stopped (``error.stopped``)."""
    note = silence_note(error)
    if attempts < 2:
        return note
    stop = f"{define_key(interface, module, 'idempotent')} = false stops that"
    if note:  # (not a call that ended them: it kept them from answering)
        return (f"{note}; this call was running on each of the {attempts} replicas lost, "
                f"and ran again after each loss ({stop})")
    went = f"; this call was running on each of the {attempts} replicas that went"
    again = "a call lost with its replica runs again elsewhere"
    if getattr(error, "killed", False):  # (each by SIGKILL: not the call's own end)
        why = ("each was killed by SIGKILL, which comes from outside the call (a user, a "
               "supervisor, or the kernel's OOM killer, which the call's own memory use can "
               "set off)")
    elif getattr(error, "stopped", False):  # (a service stopping: not the call's own end)
        why = ("each was stopped (a stop signal, SIGTERM or Ctrl-C, as a supervisor stopping "
               "the service sends it to the whole process group) or killed by SIGKILL, from "
               "outside the call")
    else:
        return f"{went}, so it may be what ends them ({again}; {stop})"
    return f"{went}, but {why}; {again} ({stop})"
