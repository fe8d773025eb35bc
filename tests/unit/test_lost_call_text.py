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
    def __init__(self, d: Any, attempts: int, args: list[Any] | None = None) -> None:
        self.id, self.dispatcher, self.attempts, self.done = 7, d, attempts, False
        self.args: list[Any] = [41, "x" * 100, b"\0" * 1000] if args is None else args
        self.kwargs: dict[str, Any] | None = {"mode": 2} if args is None else None
        self.error: BaseException | None = None

    def set_error(self, exc: BaseException) -> None:
        self.error, self.done = exc, True


def _lose(attempts: int, alive: bool, idempotent: bool = True,
          args: list[Any] | None = None) -> BaseException | None:
    link = SimpleNamespace(name="web-0", unwritten=frozenset(), dead=True, outstanding={}, module="web")
    other = SimpleNamespace(name="web-1", unwritten=frozenset(), dead=not alive, outstanding={}, module="web")
    # (``attempts``: the replicas lost with the call, this one the last: it was lost with
    # the others before; at 3, it was running alone on this one, as backlog.refill runs
    # a call lost twice)
    d = SimpleNamespace(interface="gil", links=[link, other], _index={id(link): 0, id(other): 1},
                        inflight=[1, 0], _isolated={0: 7} if attempts >= 3 else {},
                        _suspects={7: attempts - 1} if attempts > 1 else {}, _backlog=[],
                        idempotent=idempotent, max_attempts=3, comm=None, rejoins=False,
                        style=SimpleNamespace(kind="async"),
                        reactor=SimpleNamespace(work_left=lambda: None))
    rec = _Rec(d, attempts, args)
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
    if kind is PoisonCallError:  # (its third run was alone: the loss is its own)
        assert "(last: web-0); it was running there alone, and it is not tried again" in text


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


def test_an_argument_is_shown_as_the_program_passed_it_not_as_it_travels() -> None:
    """Large bytes travel marked out of band (wireargs.wire): a lost call was named
    "size(<polybus.wire.valu... at 0x7fc205840910>)", the marker's repr."""
    from polybus.client.calltext import call_text
    from polybus.client.nested import Nested
    from polybus.client.wireargs import wire
    from polybus.wire.values import OutOfBand, Ref

    big = wire(b"\0" * 100_000)
    assert type(big) is OutOfBand  # (as the call record holds it)
    assert call_text("size", [big], {"k": wire(b"\1" * 70_000)}) == \
        "size(<bytes of 100000 bytes>, k=<bytes of 70000 bytes>)"
    assert call_text("f", [Nested([1, "a"], {})], None) == "f([1, 'a'])"
    assert call_text("f", [Ref("fwd", "n.3.0"), [Ref("op", "ab12")]], None) == \
        "f(<an earlier call's value>, [<a cached operand>])"


def test_a_lost_call_with_large_bytes_is_named_by_their_length() -> None:
    from polybus.client.wireargs import wire

    text = str(_lose(1, True, idempotent=False, args=[wire(b"\0" * 100_000)]))
    assert "holding the call gil(<bytes of 100000 bytes>)" in text, text
