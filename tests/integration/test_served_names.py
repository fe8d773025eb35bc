"""A server module that serves what it does not define itself, run for real: a function
it imports from another module of the program, a ``functools.partial`` and an instance
of a class with ``__call__``, each bound by [bind] alone (no define table), called by
the client through a replica, their answers checked; a call that does not fit the
partial is told its signature. (The imported function's calls are checked before the
run; the others' only where they run, which the run's notes say.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigWarning
from polybus.testing.apps import write_bound_app


def test_an_imported_function_a_partial_and_a_callable_instance_serve(
        tmp_path: Path, no_worker_left: None) -> None:
    (tmp_path / "helpers.py").write_text(
        "def render(tile, gain=1.0):\n    return [t * gain for t in tile]\n")
    app = write_bound_app(tmp_path, server="""
        import functools

        from helpers import render


        def _scale(x, k):
            return x * k


        double = functools.partial(_scale, k=2)


        class Counter:
            def __init__(self):
                self.seen = 0

            def __call__(self, x):
                self.seen += 1
                return x + self.seen


        count = Counter()
    """, client="""
        from polybus import RemoteException, use

        render = use("render")
        double = use("double")
        count = use("count")


        def main():
            out = [render([1, 2], gain=2.0), render([3]), double(21), count(10), count(10)]
            try:
                double(*(1, 2))
            except RemoteException as exc:
                out.append(exc.remote_message)
            return out
    """, names=("render", "double", "count"), server_keys="replication = 1")
    with pytest.warns(ConfigWarning) as said:  # (their calls are checked as they run)
        *answers, misfit = polybus.run(app).result
    assert sorted(str(w.message).partition("the calls of ")[2][:6] for w in said) == [
        "count ", "double"]
    assert answers == [[2.0, 4.0], [3.0], 42, 11, 12]
    assert misfit.endswith("(the function is partial(x, *, k=2))"), misfit
