"""Review (rev2): a run interrupted anywhere, not only inside its entrypoint, does not
wait at its end for a loss line's engine word (client/lossline.py). Under mpi the
launcher's SIGKILL follows its SIGTERM within 0.25 s (engines/mpi.py): a Ctrl-C that
lands while `run` drains the calls the program never waited for (or settles their
errors) must close the session without waiting, as one inside the entrypoint does.

No cluster is started: the engine and the session are stand-ins, the interruption is
raised by the drain."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from polybus import runner
from polybus.engines.base import Cluster
from polybus.testing.apps import write_one_call_app


class _Session:
    closed: ClassVar[list[bool]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self, wait: bool = True) -> None:
        _Session.closed.append(wait)


@contextmanager
def _cluster(*args: Any, **kwargs: Any) -> Iterator[Cluster]:
    yield Cluster("127.0.0.1:1", b"t" * 32, how_ended_later=lambda name: None)


def _interrupted(session: object) -> None:
    raise KeyboardInterrupt


def test_ctrl_c_while_draining_closes_without_waiting_for_loss_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_one_call_app(tmp_path, client=("from polybus import use\n\nf = use('f')\n\n\n"
                                                  "def main():\n    return 1\n"))
    monkeypatch.setattr(runner, "started_cluster", _cluster)
    monkeypatch.setattr(runner, "Session", _Session)
    monkeypatch.setattr(runner, "drain", _interrupted)
    _Session.closed = []
    with pytest.raises(KeyboardInterrupt):
        runner.run(path, worker_output=False)
    assert _Session.closed == [False]


def test_a_loss_heard_after_the_lines_were_closed_is_said_at_once() -> None:
    """Session.close says the waiting lines first, then stops the pump, whose thread may
    step the reactor meanwhile and hear a loss (as may the batchers' and awaiting's
    closes): its line is said then, not by a thread after the run's last line, or by
    none (a daemon thread at exit)."""
    import logging
    import threading

    from polybus.client.lossline import LossLines
    from polybus.errors import ConnectionLostError

    said: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    release = threading.Event()
    lines = LossLines(lambda name: None, lambda name: (release.wait(60), None)[1])
    logger = logging.getLogger("polybus.client")
    handler = _Handler(logging.WARNING)
    logger.addHandler(handler)
    try:
        lines.close(wait=True)
        lines.lost("server-0", "server", ConnectionLostError("server-0 is gone"))
        assert said == ["polybus: warning: replica server-0 of module 'server' was lost: "
                        "server-0 is gone"]
    finally:
        release.set()
        logger.removeHandler(handler)


def test_an_interruption_while_the_lines_wait_says_them_all_the_same() -> None:
    """A stop signal that lands while the session's close waits for the engine's word
    (under mpi, the launcher's SIGTERM once a rank died: its report never comes, and
    the close waits for it) says the waiting loss lines with what is known, before the
    interruption goes on: they were dropped, and the run never said the replica lost."""
    import logging
    import signal
    import sys
    import threading

    from polybus.client.lossline import LossLines
    from polybus.errors import ConnectionLostError

    said: list[str] = []

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    main = threading.main_thread()
    if threading.current_thread() is not main:
        pytest.skip("signals reach the main thread only")
    release = threading.Event()

    def word_never_comes(name: str) -> None:
        # (once the close waits for this thread: then the launcher's stop comes)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main.ident or 0)
            while frame is not None and frame.f_code.co_name != "close":
                frame = frame.f_back
            if frame is not None:
                signal.pthread_kill(main.ident or 0, signal.SIGUSR2)
                break
            time.sleep(0.005)
        release.wait(60)

    def stopped(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    lines = LossLines(lambda name: None, word_never_comes)
    logger = logging.getLogger("polybus.client")
    handler = _Handler(logging.WARNING)
    logger.addHandler(handler)
    before = signal.signal(signal.SIGUSR2, stopped)
    try:
        lines.lost("server-0", "server", ConnectionLostError("server-0 is gone"))
        with pytest.raises(KeyboardInterrupt):
            lines.close(wait=True)
        assert said == ["polybus: warning: replica server-0 of module 'server' was lost: "
                        "server-0 is gone"]
    finally:
        signal.signal(signal.SIGUSR2, before)
        release.set()
        logger.removeHandler(handler)
