"""A call whose arguments do not fit the function: the error shows its signature.

The function never started, so the remote traceback held nothing but polybus's own
frame (``runtime.py, in _run``); a new user saw that and the bare TypeError. Now the
message ends with the function's signature, and no traceback of polybus's is shown."""

from __future__ import annotations

from pathlib import Path

import polybus
from polybus.testing.apps import write_bound_app


def test_a_call_that_does_not_fit_names_the_signature(tmp_path: Path) -> None:
    app = write_bound_app(tmp_path, server="""
        def add(a, b=0, *, scale=1):
            return (a + b) * scale

        def broken(x):
            return len(x)  # (a TypeError inside the function keeps its traceback)
    """, client="""
        from polybus import RemoteException, use

        add = use("add")
        broken = use("broken")

        def main():
            out = []
            # (unpacked: check refuses add() and add(1, 2, 3) as written, callargs.py)
            for call in (lambda: add(*()), lambda: add(*(1, 2, 3)), lambda: broken(5)):
                try:
                    call()
                except RemoteException as exc:
                    out.append([exc.remote_type, exc.remote_message, exc.remote_traceback])
            out.append(add(1, 2))
            return out
    """, names=("add", "broken"))
    missing, extra, inside, fine = polybus.run(app).result
    assert missing[0] == "TypeError" and missing[2] == ""
    assert missing[1].startswith("add() missing 1 required positional argument: 'a'")
    assert missing[1].endswith("(the function is add(a, b=0, *, scale=1))"), missing
    assert extra[1].endswith("(the function is add(a, b=0, *, scale=1))"), extra
    assert "the function is" not in inside[1] and "len(x)" in inside[2], inside
    assert fine == 3


def test_the_note_on_every_path_and_only_for_a_misfit(tmp_path: Path) -> None:
    """A sync call over tcp after the first goes the replica's inline path
    (worker/socketserve.py), which gave no note (found by a review)."""
    app = write_bound_app(tmp_path, server="""
        def add(a, b):
            return a + b
    """, client="""
        from polybus import RemoteException, use

        add = use("add")

        def main():
            out = []
            for call in [lambda: add(1, 2), lambda: add(*(1,))] * 3:  # (check: add(1))
                try:
                    out.append(call())
                except RemoteException as exc:
                    out.append(exc.remote_message)
            return out
    """, names=("add",))
    adds = polybus.run(app).result
    assert adds[0::2] == [3, 3, 3]
    assert all(m.endswith("(the function is add(a, b))") for m in adds[1::2]), adds


def test_a_c_function_s_own_type_error_is_no_misfit() -> None:
    """math.sqrt("x"): the arguments bind, the function raised; no signature note (a
    worker serving a C function, as WorkerRuntime may, got one it should not have)."""
    import math

    from polybus.worker.replies import _misfit

    def add(a: int, b: int) -> int:
        return a + b

    assert _misfit(math.sqrt, ("x",), None) is None
    assert _misfit(add, (1,), None) == "add(a: 'int', b: 'int') -> 'int'"
    assert _misfit(add, (1, 2), None) is None

