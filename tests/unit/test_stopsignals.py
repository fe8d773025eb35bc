"""StopSignals: a stop signal always ends the wait, wherever the main thread is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from polybus.stopsignals import StopSignals

# The worker's and the registry's main loop, at its most exposed: waiting over and over,
# so the signal lands anywhere inside the wait. With `threading.Event` and a handler that
# sets it, 54 of 100 such processes hung for good (the handler waited for the lock the
# interrupted `Event.wait` held).
LOOP = textwrap.dedent("""
    import signal, sys
    from polybus.stopsignals import StopSignals
    stop = StopSignals((signal.SIGTERM,))
    print("ready", flush=True)
    while not stop.wait(0):
        pass
    stop.close()
    print("stopped by", stop.signum, flush=True)
""")


@pytest.fixture
def restore_handlers() -> Iterator[None]:
    old = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for s, h in old.items():
        signal.signal(s, h)


def test_a_signal_sent_mid_wait_always_ends_it() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", LOOP], stdout=subprocess.PIPE, text=True)
             for _ in range(20)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
            p.send_signal(signal.SIGTERM)
        for p in procs:
            out, _ = p.communicate(timeout=20)
            assert p.returncode == 0
            assert out == f"stopped by {int(signal.SIGTERM)}\n"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_wait_times_out_without_a_signal_and_keeps_the_first_one(restore_handlers: None) -> None:
    with StopSignals((signal.SIGUSR1, signal.SIGUSR2)) as stop:
        assert stop.wait(0.01) is False and stop.signum is None
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.wait() is True
        assert stop.signum == signal.SIGUSR2
    os.kill(os.getpid(), signal.SIGUSR1)  # after close: noted, nothing written anywhere
    assert stop.signum == signal.SIGUSR2 and stop.wait(0) is True


def test_within_raising_a_signal_ends_a_blocking_call_and_is_noted(
        restore_handlers: None) -> None:
    """A blocked call with no stop of its own to look at (a worker's first registration
    with a registry that never answers) ends at the signal; outside, nothing raises."""
    import socket

    from polybus.stopsignals import Stopping

    a, b = socket.socketpair()
    with a, b, StopSignals((signal.SIGUSR1,)) as stop:
        a.settimeout(30)
        with pytest.raises(Stopping), stop.raising():
            os.kill(os.getpid(), signal.SIGUSR1)  # (its handler raises here, or in the recv)
            a.recv(1)
        assert stop.signum == signal.SIGUSR1 and stop.wait(0)
        with pytest.raises(Stopping), stop.raising():  # (noted before: raised at once)
            pytest.fail("the block ran after the stop came")
    with StopSignals((signal.SIGUSR1,)) as stop:
        with stop.raising():
            stop.request()  # (from any thread: raises nothing)
        os.kill(os.getpid(), signal.SIGUSR1)  # (outside: noted only)
        assert stop.wait(5) and stop.signum == signal.SIGUSR1


def test_a_signal_that_came_before_the_handlers_ends_the_wait_as_one_after(
        restore_handlers: None) -> None:
    """`came`: a worker's stop noted while it started (worker/startstop.py), passed on:
    the wait ends at once, the first registration is not tried, no request is noted."""
    from polybus.stopsignals import Stopping

    with StopSignals((signal.SIGUSR1,)) as stop:
        stop.came(signal.SIGTERM)
        assert stop.wait(5) is True
        assert stop.signum == signal.SIGTERM and not stop.requested
        with pytest.raises(Stopping), stop.raising():
            pytest.fail("the first registration ran after the stop came")
        os.kill(os.getpid(), signal.SIGUSR1)  # (a later one: the first is the one said)
        stop.came(signal.SIGINT)
        assert stop.signum == signal.SIGTERM
