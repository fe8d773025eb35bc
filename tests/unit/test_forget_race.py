"""A call given up on whose late answer comes, on another thread, while it is being let
go (`Dispatcher.forget`; for an aggregated batch, client/batchgiveup.py `forget_batch`):
its place at the replica is freed, once. The call was taken out of the link's calls
before it was noted as given up on, so an answer read between the two found neither,
freed nothing, and the place stayed taken for the run (under async-demand(N), one of
that replica's N for good). No network: the answer's arrival is played inside the pop."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from polybus.client.calls import late
from polybus.client.dispatch import Dispatcher


class _AnsweredDuringPop(dict[int, Any]):
    """A link's outstanding calls, where the answer to a call arrives (on the reading
    thread, as answers.py reads it: not found among the calls, so a late one) just
    after the call is taken out."""

    def __init__(self, link: Any) -> None:
        super().__init__()
        self.link = link

    def pop(self, key: int, *default: Any) -> Any:
        got = super().pop(key, *default)
        late(self.link, key)  # (its answer, read now)
        return got


def test_an_answer_read_while_a_call_is_let_go_frees_its_place() -> None:
    link = SimpleNamespace(name="r0", dead=False, abandoned={})
    link.outstanding = _AnsweredDuringPop(link)
    d: Any = SimpleNamespace(_index={id(link): 0}, inflight=[1], _backlog=[], comm=None,
                             keeper=None, _cleared=lambda rec, i: None)
    d.freed = lambda lk: Dispatcher.freed(d, lk)
    rec = SimpleNamespace(id=5, link=link, dispatcher=d)
    link.outstanding[5] = rec
    Dispatcher.forget(d, rec)
    assert d.inflight == [0]  # its place free: the answer came
    assert link.abandoned == {}  # and nothing waits for an answer that came


def test_a_call_let_go_with_no_answer_yet_keeps_its_place_until_it_comes() -> None:
    link = SimpleNamespace(name="r0", dead=False, abandoned={}, outstanding={})
    d: Any = SimpleNamespace(_index={id(link): 0}, inflight=[1], _backlog=[], comm=None,
                             keeper=None, _cleared=lambda rec, i: None)
    d.freed = lambda lk: Dispatcher.freed(d, lk)
    rec = SimpleNamespace(id=5, link=link, dispatcher=d)
    link.outstanding[5] = rec
    Dispatcher.forget(d, rec)
    assert d.inflight == [1] and link.abandoned == {5: d}  # still running there
    late(link, 5)  # its late answer
    assert d.inflight == [0] and link.abandoned == {}


class _AnswerReadFirst(dict[int, Any]):
    """A link's outstanding calls, where the answer of a batch is read (on the reading
    thread, as answers.py does: taken out and answered if found, else a late one) just
    before the thread letting it go takes it out."""

    def __init__(self, link: Any) -> None:
        super().__init__()
        self.link = link
        self.answered: list[int] = []

    def _answer(self, key: int) -> None:
        if super().pop(key, None) is not None:
            self.answered.append(key)  # (batch.answered: its place freed with it)
        else:
            late(self.link, key)

    def pop(self, key: int, *default: Any) -> Any:
        self._answer(key)
        return super().pop(key, *default)

    def __delitem__(self, key: int) -> None:
        self._answer(key)
        super().__delitem__(key)


def test_a_batch_answered_while_it_is_let_go_is_taken_as_answered_once() -> None:
    import threading

    from polybus.client.batchgiveup import forget_batch, freed

    link = SimpleNamespace(name="r0", dead=False, abandoned={})
    link.outstanding = _AnswerReadFirst(link)
    sent: list[Any] = []
    bt: Any = SimpleNamespace(lock=threading.Lock(), held=[[]], _index={id(link): 0},
                              inflight=[1], backlog=[],
                              reactor=SimpleNamespace(
                                  send_unwaited=lambda lk, m: sent.append(m),
                                  work_left=lambda: None))
    bt.freed = lambda lk: freed(bt, lk)
    b = SimpleNamespace(id=9, link=link, done=False, entries=0, late={0, 1},
                        args=[(1,), (2,)], only=None)
    link.outstanding[9] = b
    forget_batch(bt, b)  # (raised KeyError: the answer had taken it out)
    assert link.outstanding.answered == [9]  # answered as any batch, once
    assert bt.inflight == [1]  # (freed by its answer's own path, not twice here)
    assert link.abandoned == {} and sent == []  # nothing waits, nothing to revoke


def test_a_batch_given_up_whole_is_revoked_without_waiting_for_room() -> None:
    """As a single call's (calls.py, `abandon`): a batch every call of which was given
    up on is revoked by a send that never waits for room in the connection."""
    import threading

    from polybus.client.batchgiveup import forget_batch, freed
    from polybus.wire.messages import Revoke

    link = SimpleNamespace(name="r0", dead=False, abandoned={}, outstanding={})
    sent: list[Any] = []
    bt: Any = SimpleNamespace(lock=threading.Lock(), held=[[]], _index={id(link): 0},
                              inflight=[1], backlog=[],
                              reactor=SimpleNamespace(  # (no `send`: it would wait)
                                  send_unwaited=lambda lk, m: sent.append(m),
                                  work_left=lambda: None))
    bt.freed = lambda lk: freed(bt, lk)
    b = SimpleNamespace(id=9, link=link, done=False, entries=0, late={0, 1},
                        args=[(1,), (2,)], only=None)
    link.outstanding[9] = b
    forget_batch(bt, b)
    assert sent == [Revoke([9], 0)] and link.abandoned == {9: bt} and b.done
