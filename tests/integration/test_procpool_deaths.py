"""A process of a replica's ``pool = "processes:N"`` that dies: the replica starts a new
pool and serves on; the calls that were in the old one run again, once, alone in the
new one (idempotent interfaces), or fail with WorkerDiedError (docs/reliability.md).

It used to be broken for good: every later call failed with BrokenProcessPool."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import multiprocessing
    import os
    import signal
    import time

    def f(x, t=0.0):
        time.sleep(t)
        if x == -1:
            os._exit(3)
        return [x, os.getpid()]

    def once(x, flag):
        # Its process is killed the first time only (as the OOM killer or a stray
        # SIGKILL would): a call of its own that ran into an outside death.
        if not os.path.exists(flag):
            open(flag, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return [x, os.getpid()]

    def children(expected=2):
        # (a thread-pool interface: runs in the replica) its pool's live processes, once
        # they are ``expected`` many or 10 s have passed: a broken pool's other child is
        # killed by the pool's watcher thread and may not have exited yet (on a loaded
        # machine it was still there when this looked at once)
        end = time.monotonic() + 10.0
        while True:
            live = sorted(p.pid for p in multiprocessing.active_children())
            if len(live) <= expected or time.monotonic() > end:
                return live
            time.sleep(0.01)
"""

TOML = """
    [modules.server]
    source = "server.py"
    define.f = {{ pool = "processes:2"{f} }}
    define.once = {{ pool = "processes:2"{once} }}
    define.children = {{}}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["{flag}"]
    use.f = {{ callstyle = "{style}" }}
    use.once = {{ callstyle = "{style}" }}
    use.children = {{}}

    [bind]
    "client.f" = "server.f"
    "client.once" = "server.once"
    "client.children" = "server.children"
"""


def _run(tmp_path: Path, client: str, *, style: str = "async", f: str = "",
         once: str = "") -> Any:
    toml = TOML.format(f=f, once=once, style=style, flag=tmp_path / "died-once")
    client = textwrap.dedent(CLIENT_HEAD) + textwrap.dedent(client)
    return polybus.run(write_app(tmp_path, server=SERVER, client=client, toml=toml)).result


CLIENT_HEAD = """
    import os
    import signal

    from polybus import use, wait
    from polybus.errors import PolybusError

    f, once, children = use("f"), use("once"), use("children")

    def outcome(call, *args):
        try:
            return wait(call(*args))  # (a sync call raises here, an async one at the wait)
        except PolybusError as exc:
            return [type(exc).__name__, str(exc)]
"""


@pytest.mark.parametrize("style", ["sync", "async", "async-demand(2)"])
def test_a_call_that_kills_its_pool_process_fails_alone_and_the_replica_serves_on(
        tmp_path: Path, style: str) -> None:
    """The new user's case: 10 calls, f(-1) (os._exit(3)), 10 more, each waited for."""
    result = _run(tmp_path, """
        def main(flag):
            before = [outcome(f, x) for x in range(10)]
            poison = outcome(f, -1)
            after = [outcome(f, x) for x in range(10, 20)]
            return before, poison, after, children()
    """, style=style)
    before, poison, after, pool = result
    assert [v[0] for v in before] == list(range(10)), before
    assert [v[0] for v in after] == list(range(10, 20)), after
    kind, message = poison
    assert kind == "PoisonCallError", poison
    assert "exited with status 3" in message and "server-0" in message, message
    assert "define.f.idempotent = false" in message, message
    # A new pool: its own processes, as many as before (the dead pools' are gone).
    assert not {v[1] for v in before} & {v[1] for v in after}
    assert {v[1] for v in after} <= set(pool) and len(pool) == 2, (after, pool)


def test_the_calls_beside_the_one_that_kills_the_pool_run_again_and_succeed(
        tmp_path: Path) -> None:
    """Bystanders (in the pool when it broke) run again alone, once each; the call that
    kills its process again when alone is the one that fails."""
    result = _run(tmp_path, """
        def main(flag):
            bystander = f(1, 0.7)  # (running, most likely, when the other one dies)
            poison = f(-1, 0.3)
            return outcome(lambda: bystander), outcome(lambda: poison), outcome(f, 2)
    """)
    bystander, poison, later = result
    assert bystander[0] == 1, bystander
    assert poison[0] == "PoisonCallError", poison
    assert later[0] == 2, later


def test_a_call_whose_process_is_killed_once_runs_again_and_answers(tmp_path: Path) -> None:
    """At least once, as for a lost replica: an outside death (SIGKILL) costs a re-run."""
    result = _run(tmp_path, """
        def main(flag):
            return outcome(once, 7, flag), os.path.exists(flag), outcome(f, 8)
    """)
    value, died, later = result
    assert value[0] == 7 and died is True, value
    assert later[0] == 8, later


def test_a_not_idempotent_call_whose_process_died_fails_and_is_not_run_again(
        tmp_path: Path) -> None:
    result = _run(tmp_path, """
        def main(flag):
            return outcome(once, 7, flag), outcome(once, 8, flag)
    """, once=", idempotent = false")
    lost, later = result
    kind, message = lost
    assert kind == "WorkerDiedError", lost
    assert "killed by signal 9 (SIGKILL)" in message and "not idempotent" in message, message
    assert later[0] == 8, later  # (the flag is there: it does not die this time)


def test_pool_processes_killed_from_outside_are_replaced(tmp_path: Path) -> None:
    """Both processes SIGKILLed by hand, one while a call runs in it and the other idle
    or running: that call answers, and so do the next."""
    result = _run(tmp_path, """
        import time

        def main(flag):
            first = children()
            running = f(1, 0.6)
            time.sleep(0.2)
            for pid in first:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:  # (ended already: the replica, replacing the
                    pass                    # pool the first kill broke, ended it)
            return (first, outcome(lambda: running), [outcome(f, x) for x in range(2, 6)],
                    children())
    """)
    first, running, later, pool = result
    assert running[0] == 1 and running[1] not in first, running
    assert [v[0] for v in later] == [2, 3, 4, 5], later
    assert len(pool) == 2 and not set(pool) & set(first), (first, pool)
