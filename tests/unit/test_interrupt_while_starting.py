"""Ctrl-C (or another exception) while `polybus run` starts its workers, before the
program's entrypoint is called, is not placed at a line of "the program".

From a new-user trial: Ctrl-C half a second into `polybus run` said `polybus run:
interrupted while the program was at .../subprocess.py, line 1883, in _execute_child`
(or `<frozen importlib._bootstrap>`, or `contextlib.py, line 137, in __enter__`): the
program had not started, and those lines are the start-up's own. The frame under
`run`'s there is contextlib's `__enter__` of the `with` that starts the cluster, which
was taken for the entrypoint's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from polybus import runner
from polybus.testing.apps import write_one_call_app
from polybus.wherestopped import client_traceback, where_stopped


def _interrupted_while_starting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                exc: BaseException) -> BaseException:
    app = write_one_call_app(tmp_path)

    @contextmanager
    def starting(*args: object, **kwargs: object) -> Iterator[None]:
        raise exc  # (as a Ctrl-C arriving while the workers start would)
        yield

    monkeypatch.setattr(runner, "started_cluster", starting)
    with pytest.raises(type(exc)) as info:
        runner.run(app)
    return info.value


def test_a_ctrl_c_while_the_workers_start_names_no_line_of_the_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exc = _interrupted_while_starting(tmp_path, monkeypatch, KeyboardInterrupt())
    assert client_traceback(exc) is None
    assert where_stopped(exc) == ""


def test_an_error_while_the_workers_start_is_not_the_clients(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (`polybus run` says "the client raised X" only of what the entrypoint raised)
    exc = _interrupted_while_starting(tmp_path, monkeypatch, OSError("no room"))
    assert client_traceback(exc) is None
