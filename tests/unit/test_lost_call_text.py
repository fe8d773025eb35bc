"""What a call lost with its replica fails with says why and what stops it (client/backlog.py
`lost`; fakes, no network): a call that ran out of attempts on replicas taken for dead for
their silence names the heartbeat and the idempotent key, as "every replica is gone"
does (serve dials such a replica again, so which of the two a call meets is a race)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client import backlog
from polybus.errors import ConnectionLostError, PoisonCallError, WorkerDiedError


class _Rec:
    def __init__(self, d: Any, attempts: int) -> None:
        self.id, self.dispatcher, self.attempts, self.done = 7, d, attempts, False
        self.args: list[Any] = [41, "x" * 100, b"\0" * 1000]
        self.kwargs: dict[str, Any] | None = {"mode": 2}
        self.error: BaseException | None = None

    def set_error(self, exc: BaseException) -> None:
        self.error, self.done = exc, True


def _lose(attempts: int, alive: bool, idempotent: bool = True) -> BaseException | None:
    link = SimpleNamespace(name="web-0", dead=True, outstanding={}, module="web")
    other = SimpleNamespace(name="web-1", dead=not alive, outstanding={}, module="web")
    d = SimpleNamespace(interface="gil", links=[link, other], _index={id(link): 0, id(other): 1},
                        inflight=[1, 0], _isolated={}, _suspects=set(), _backlog=[],
                        idempotent=idempotent, max_attempts=3, comm=None,
                        _alive=lambda: [False, alive],
                        reactor=SimpleNamespace(work_left=lambda: None))
    rec = _Rec(d, attempts)
    link.outstanding[rec.id] = rec
    lost = ConnectionLostError("web-0 answered no Ping for 0.75 s")
    lost.heartbeat = 0.25  # type: ignore[attr-defined]  # (taken for dead: client/control.py)
    backlog.lost(d, link, lost)  # type: ignore[arg-type]
    return rec.error


@pytest.mark.parametrize(("attempts", "alive", "kind"), [(3, True, PoisonCallError),
                                                         (2, False, ConnectionLostError)])
def test_a_call_lost_on_replicas_taken_for_dead_names_the_heartbeat_and_the_key(
        attempts: int, alive: bool, kind: type[BaseException]) -> None:
    error = _lose(attempts, alive)
    assert type(error) is kind
    text = str(error)
    assert "taken for dead while its process may be alive" in text
    assert "cluster.heartbeat" in text
    assert f"this call was running on each of the {attempts} replicas lost" in text
    assert "modules.web.define.gil.idempotent = false stops that" in text


def test_a_call_that_is_not_idempotent_is_not_run_again() -> None:
    error = _lose(1, True, idempotent=False)
    assert type(error) is WorkerDiedError
    assert "was taken for dead holding the call gil(41, " in str(error)
    assert ", and gil is not idempotent, so it was not re-run" in str(error)


@pytest.mark.parametrize(("attempts", "alive", "idempotent"), [
    (3, True, True), (2, False, True), (1, True, False)])
def test_a_lost_call_is_named_by_its_arguments_each_cut_short(
        attempts: int, alive: bool, idempotent: bool) -> None:
    # (which of the program's calls to gil it was: the one with these arguments; a long
    # string cut, bytes by their length, never their contents)
    text = str(_lose(attempts, alive, idempotent))
    assert "gil(41, 'xxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxx', <bytes of 1000 bytes>, mode=2)" in text
    assert "x" * 50 not in text


def test_a_call_text_shows_arrays_by_shape_and_stays_short() -> None:
    import numpy as np

    from polybus.client.calltext import LIMIT, call_text

    class Bad:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert call_text("f", [np.zeros((3, 4)), Bad()], None).startswith(
        "f(<ndarray 3x4 float64>, <Bad instance at ")
    long = call_text("f", list(range(100)), {f"k{i}": "v" * 30 for i in range(20)})
    assert len(long) == LIMIT and long.endswith("...)")
