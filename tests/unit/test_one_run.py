"""`one_run` (client/stubs.py): one run under way in a process at a time, a run nested
in a client's entrypoint aside, and what it leaves behind however it ends."""

from __future__ import annotations

import threading

import pytest

from polybus.client import stubs
from polybus.errors import UsageError


class _InterruptedAfterAppend(list[threading.Thread]):
    """A Ctrl-C handled right as the run was counted in (a signal's handler runs
    between two bytecodes: here, just after the append returned); once."""

    interrupted = False

    def append(self, thread: threading.Thread) -> None:
        super().append(thread)
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt


def _let_in_from_another_thread() -> BaseException | None:
    """What `one_run` in a new thread raised (None: it was let in)."""
    out: list[BaseException | None] = [None]

    def enter() -> None:
        try:
            with stubs.one_run():
                pass
        except BaseException as exc:  # (said by the caller's assertion)
            out[0] = exc

    t = threading.Thread(target=enter)
    t.start()
    t.join(10)
    return out[0]


def test_an_interrupt_as_a_run_is_let_in_leaves_no_run_under_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the thread stayed counted as running a run, and every later run of
    another thread was refused as "another polybus run is under way"."""
    runs = _InterruptedAfterAppend()
    monkeypatch.setattr(stubs, "_runs", runs)
    with pytest.raises(KeyboardInterrupt), stubs.one_run():
        pytest.fail("the block ran")  # pragma: no cover
    assert runs == []
    assert _let_in_from_another_thread() is None


def test_a_run_of_another_thread_is_refused_and_a_nested_one_welcome() -> None:
    with stubs.one_run() as outer:
        assert outer is None  # (a run of its own: nested in none)
        refused = _let_in_from_another_thread()
        assert isinstance(refused, UsageError), refused
        assert "another polybus run is under way" in str(refused)
        # (a client's entrypoint that starts a run in a thread of its own is told that
        # its nested run is welcome in the entrypoint's thread alone)
        assert "called in the entrypoint's own thread, not in one it started" in str(
            refused)
        with stubs.one_run():  # (nested: in the same thread)
            pass
    assert _let_in_from_another_thread() is None
    assert stubs._runs == []
