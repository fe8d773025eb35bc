"""pool = "processes:N": calls run in the replica's child processes, same answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


def test_process_pool_runs_calls_in_child_processes_of_the_replica() -> None:
    r = polybus.run(APP)
    assert r.result["ok"] is True
    assert r.calls == 8
    # Each call ran in a child of the one replica, not in the replica itself (whose
    # parent is this test process, which started it through the local engine).
    assert len(r.result["parents"]) == 1
    assert r.result["parents"][0] != os.getpid()


def test_thread_pool_runs_calls_in_the_replica_itself() -> None:
    r = polybus.run(APP, {"modules.server.define.work.pool": 2})
    assert r.result == {"ok": True, "parents": [os.getpid()]}


def test_the_children_are_started_with_the_replica_not_by_the_first_calls() -> None:
    """Spawning them (and importing the module in each) is start-up, which elapsed_s
    does not count: the first calls of a run used to pay for it."""
    r = polybus.run(APP, {"modules.client.entrypoint": "before_any_call"})
    assert r.result == 2


TWO_ARGS = """
    import multiprocessing
    import os

    class TwoArgs(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a} and {b}")

    def odd(x):
        if x == 1:
            raise TwoArgs(x, 2)
        return os.getpid()

    def children():
        return sorted(p.pid for p in multiprocessing.active_children())
"""


@pytest.mark.parametrize("pool", ["1", '"processes:2"'])
def test_an_exception_that_would_not_unpickle_fails_its_call_as_in_a_thread(
        tmp_path: Path, pool: str) -> None:
    """An exception class whose __init__ does not take its args (a common one) could
    not be rebuilt in the replica, and that broke the whole process pool."""
    app = write_app(tmp_path, server=TWO_ARGS, toml=f"""
        [modules.server]
        source = "server.py"
        define.odd = {{ pool = {pool} }}
        define.children = {{}}

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.odd" = "server.odd"
        "client.children" = "server.children"
    """, client="""
        from polybus import use
        from polybus.errors import RemoteException

        odd, children = use("odd"), use("children")

        def main():
            before = [odd(0), children()]
            try:
                odd(1)
            except RemoteException as exc:
                caught = [exc.remote_type, exc.remote_message, exc.remote_traceback]
            return before, caught, [odd(2), children()]
    """)
    before, caught, after = polybus.run(app).result
    kind, message, tb = caught
    assert (kind, message) == ("server.TwoArgs", "1 and 2")
    assert tb.startswith(f'  File "{tmp_path / "server.py"}", line 11, in odd\n'), tb
    assert tb.rstrip().endswith("server.TwoArgs: 1 and 2"), tb
    assert after[1] == before[1]  # (the same pool's children, none for threads: unbroken)
    if pool != "1":
        assert len(after[1]) == 2 and after[0] in after[1], after


SEALED = """
    import multiprocessing
    import os

    def _refuse(text):
        raise ValueError(f"no rebuilding {text} here")

    class Sealed:
        # Pickles (in the pool's process), but does not unpickle (in the replica).
        def __init__(self, text):
            self.text = text

        def __reduce__(self):
            return (_refuse, (self.text,))

    def make(x):
        return Sealed(x) if x == "sealed" else [x, os.getpid()]

    def children():
        return sorted(p.pid for p in multiprocessing.active_children())
"""


def test_an_answer_that_would_not_unpickle_in_the_replica_fails_its_call_alone(
        tmp_path: Path) -> None:
    """It was read by the executor's own thread, whose error broke the whole pool: the
    call ran again alone, broke the new pool too, and failed as a PoisonCallError (a
    call that kills its process), taking any call beside it along for a re-run."""
    app = write_app(tmp_path, server=SEALED, toml="""
        [modules.server]
        source = "server.py"
        define.make = { pool = "processes:2" }
        define.children = {}

        [modules.client]
        source = "client.py"
        entrypoint = "main"

        [bind]
        "client.make" = "server.make"
        "client.children" = "server.children"
    """, client="""
        from polybus import use
        from polybus.errors import PolybusError, RemoteException

        make, children = use("make"), use("children")

        def main():
            before = [make(0), children()]
            try:
                make("sealed")
            except RemoteException as exc:
                caught = [type(exc).__name__, exc.remote_type, exc.remote_message,
                          exc.remote_traceback]
            except PolybusError as exc:
                caught = [type(exc).__name__, "", str(exc), ""]
            return before, caught, [make(2), children()]
    """)
    before, caught, after = polybus.run(app).result
    kind, remote_type, message, tb = caught
    assert (kind, remote_type) == ("RemoteValueError", "ValueError"), caught
    assert "could not be unpickled in the replica" in message, message
    assert message.endswith(": no rebuilding sealed here"), message
    assert f'"{tmp_path / "server.py"}", line 6, in _refuse' in tb, tb  # (what raised)
    assert after[0][0] == 2
    assert after[1] == before[1] and len(after[1]) == 2, (before, after)  # (same pool)
    assert after[0][1] in after[1]
