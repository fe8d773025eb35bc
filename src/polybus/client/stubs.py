"""`use("name")`: the client module's handle on an interface the configuration binds.

A stub is made at import time, before any run exists; each call finds the run's
session then, so the same module works under every configuration.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from polybus.errors import UsageError

if TYPE_CHECKING:
    from polybus.client.pump import Gate
    from polybus.client.session import Session

_global: list[Session | None] = [None]
_ran = [False]  # a run has ended in this process (its threads may call on after it)
# Where this process is when no session is active, for what a call is told then:
# ("importing", module key, entrypoint) while a run imports its client module
# (runner.py), ("replica", module key, "") in a replica (worker/main.py)
_phase: list[tuple[str, str, str] | None] = [None]
# The threads of the runs under way, the outermost's first (a run nested in a client's
# entrypoint is in its outer run's thread): the stubs of every thread call through one
# session, so a run another thread starts meanwhile is refused (`one_run`).
_runs: list[threading.Thread] = []
_runs_lock = threading.Lock()
# The import names of the modules called in the client (``replication = 0``) of the run
# under way (client/inclient.py adds and removes them): a use() one of their functions
# makes is refused as a replica's is, though the session that would take it is here
# (`_refuse_inside`). Empty but in such a run: a look costs a stub call ~15 ns.
SERVED_HERE: set[str] = set()


def importing(key: str | None, entrypoint: str = "") -> None:
    """A run is importing its client module ``key`` (None: it has)."""
    _phase[0] = ("importing", key, entrypoint) if key is not None else None


def serving(key: str) -> None:
    """This process is a replica of module ``key``: it has no session, ever."""
    _phase[0] = ("replica", key, "")


def _refuse_inside(call: str, frame: FrameType | None) -> None:
    """A UsageError if ``frame`` (that of the code that made ``call``: ``use('g')``,
    ``polybus.broadcast()``) is of a function of a module called in the client, or for
    broadcast() any frame under it: ``call`` is refused as its replica's is."""
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if name in SERVED_HERE:
            break
        frame = frame.f_back if call == "polybus.broadcast()" else None
    else:
        return
    from polybus.config.replicause import replica_broadcast, replica_call
    from polybus.usernames import key_of

    module = key_of(str(name))
    if call == "polybus.broadcast()":
        raise UsageError(replica_broadcast(module, in_client=True))
    raise UsageError("; ".join(replica_call(module, call, in_client=True)))


def _written(frame: FrameType) -> str | None:
    """The call ``frame`` is making, as its source writes it, and its place:
    ``square(2) (client.py, line 5)``; None when its source is not at hand, or the call
    is written on several lines or at length."""
    import linecache
    from pathlib import Path

    code = frame.f_code
    try:
        start, end, col, end_col = list(code.co_positions())[frame.f_lasti // 2]
    except IndexError:
        return None
    text = linecache.getline(code.co_filename, start or 0).encode()
    if start is None or start != end or col is None or end_col is None or not text:
        return None
    call = text[col:end_col].decode(errors="replace")
    if not call.endswith(")") or len(call) > 60:
        return None
    return f"{call} ({Path(code.co_filename).name}, line {start})"


def current(what: str = "a use()d interface was called", call: str = "") -> Session:
    """The running session; else a UsageError that says why there is none (``what``: the
    call made, as a sentence; ``call``: the same as code, ``use('f')``)."""
    s = _global[0]
    if SERVED_HERE:  # (a module called in the client makes no such call)
        _refuse_inside(call or "use()", sys._getframe(1))
    if s is None:
        phase = _phase[0]
        if phase is not None and phase[0] == "replica":
            from polybus.config.replicause import replica_broadcast, replica_call

            if call == "polybus.broadcast()":
                raise UsageError(replica_broadcast(phase[1]))
            raise UsageError("; ".join(replica_call(phase[1], call or "use()")))
        # (the call as written and where, else as `call` says it: a program of several
        # use()d names is told which one)
        written = _written(sys._getframe(2))
        said = f"{written or call} was called" if written or call else what
        if phase is not None:
            raise UsageError(f"{said} while the client module {phase[1]!r} was being "
                             "imported, before the run's session starts: call it from the "
                             f"entrypoint, {phase[2]}(), or from a function it calls")
        if _ran[0] and threading.current_thread() is threading.main_thread():
            # (an interactive session calling the client's function by hand after
            # polybus.run returned: no thread of the program to join)
            raise UsageError(f"{said} outside a polybus run: the run it was made for has "
                             "ended, and a run takes calls only while its entrypoint "
                             "runs; start a run, polybus.run() or `polybus run app.toml`, "
                             "which calls the entrypoint")
        if _ran[0]:
            raise UsageError(f"{said} outside a polybus run: the run's entrypoint "
                             "returned, and a run takes calls only while its entrypoint "
                             "runs (the process may still be waiting for the program's "
                             "threads); join a thread that makes calls before the "
                             "entrypoint returns")
        raise UsageError(f"{said} outside a polybus run; start the "
                         "program with `polybus run app.toml` or polybus.run()")
    return s


def current_gate() -> Gate | None:
    """The running session's gate (client/pump.py), if it has one."""
    s = _global[0]
    return s.gate if s is not None else None


def activate(session: Session | None) -> None:
    """Make ``session`` the one stubs call through (for every thread of the program)."""
    if session is None and _global[0] is not None:
        _ran[0] = True
    _global[0] = session


@contextmanager
def one_run() -> Iterator[Session | None]:
    """A run under way in this thread while the block runs; it gives the session of the
    run this one is nested in (None for a run of its own), read as this one is let in,
    so that a run let in as another thread's ends does not take that one's session for
    an outer run's. Refused with a UsageError while a run of another thread is under
    way: its program's calls, from whatever thread, go through the one active session,
    so a second run would take them over (and leave them with none when it ended). A
    run nested in a client, in its outer run's thread, is welcome."""
    me = threading.current_thread()
    depth = -1  # (this run's place in _runs: an interrupt anywhere leaves it as it was)
    try:
        with _runs_lock:
            if _runs and _runs[0] is not me:
                raise UsageError(
                    f"another polybus run is under way in this process (started in "
                    f"thread {_runs[0].name!r}, this is {me.name!r}): a process runs one "
                    "at a time (a run nested in a client's entrypoint aside, called in the "
                    "entrypoint's own thread, not in one it started), since its program's "
                    "calls go through the run under way from any thread; start this one "
                    "once that one has ended, or in a process of its own (a subprocess "
                    "running `polybus run`)")
            outer = _global[0] if _runs else None
            depth = len(_runs)
            _runs.append(me)
        yield outer
    finally:
        if depth >= 0:
            with _runs_lock:
                del _runs[depth:]


class Stub:
    """Calls the bound interface with the call style the configuration gives it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        s = _global[0]
        if s is not None:  # straight to the binding's entry (one frame less per call)
            if SERVED_HERE and sys._getframe(1).f_globals.get("__name__") in SERVED_HERE:
                _refuse_inside(f"use({self.name!r})", sys._getframe(1))  # (made by a
                # module called in the client: refused, as a replica's)
            entry = s.entries.get(self.name)
            if entry is not None:
                g = s.gate
                if g is None:
                    return entry(args, kwargs)
                inside = g.inside  # (Gate.enter and leave, written out: client/pump.py)
                inside.append(None)
                if g.busy:
                    g.wait_turn()
                try:
                    return entry(args, kwargs)
                finally:
                    inside.pop()
                    g.came = True
                    if g.dirty and not inside:
                        g.left_work()
            local = s.local.get(self.name)
            if local is not None:  # (replication = 0: a plain call, never inside the gate,
                return local(args, kwargs)  # which would keep the pump out: client/inclient.py)
        return current(call=f"use({self.name!r})").call(self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"use({self.name!r})"

    def __getattr__(self, attr: str) -> Any:
        # Only for names a Stub lacks: `use("echo").echo(x)` is a natural first guess.
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(
            f"use({self.name!r}) is the interface itself, a function with no attributes: "
            f"call it as {self.name}(...), not .{attr}(...)")


def use(name: str) -> Stub:
    """The interface ``name`` as the configuration binds it for this module."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"use() takes an interface name, not {name!r}")
    return Stub(name)
