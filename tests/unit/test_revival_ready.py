"""A request that waits for a lost replica (http/revival.py, `Revival.ready`) lets the
event loop run between two looks: a look that has just ended, its own callback
(`_looked`) not yet run, is not awaited again and again.

In-process, with a session made of the few parts `ready` reads; no process started."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from polybus.http.revival import Revival, _Key


def _session() -> tuple[Any, Any]:
    link = SimpleNamespace(dead=True, name="web-0", module="web")
    d = SimpleNamespace(links=[link], interface="pid@http", _backlog=[],
                        _index={id(link): 0}, rejoins=False)
    session = SimpleNamespace(dispatchers={"pid@http": d}, links={"web": [link]},
                              batchers=[], ended={},
                              registry=SimpleNamespace(address="tcp://127.0.0.1:1"),
                              _wait=(0.0, 0.0))  # (no --wait-for-workers)
    return session, link


def test_a_request_that_finds_a_look_just_ended_lets_the_loop_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The look's result came (the future done) in the same turn of the loop as the
    request's step, before the look's callback ran: the request awaited the done look,
    which returns at once without yielding, so the callback that ends the look never
    ran and the loop spun at 100% CPU, serving nothing, deaf to SIGTERM."""
    session, link = _session()
    shielded = 0
    shield = asyncio.shield

    def counted(arg: Any) -> Any:  # (a spin fails the test instead of hanging it)
        nonlocal shielded
        shielded += 1
        if shielded > 100:
            raise AssertionError("ready awaited the same ended look again and again, "
                                 "the loop never let run")
        return shield(arg)

    monkeypatch.setattr(asyncio, "shield", counted)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        revival = Revival(session, loop, lambda lk: None)  # (stays None: it waits)
        k = revival.keys.setdefault("web", _Key())
        look: asyncio.Future[Any] = loop.create_future()  # (a look under way: `_look`)
        k.look, k.last = look, time.monotonic()
        look.add_done_callback(lambda f: revival._looked("web", k, f))
        asking = asyncio.ensure_future(revival.ready("pid@http"))  # (its step queued)
        look.set_result(None)  # ended, its callback queued after the request's step
        loop.call_soon(setattr, link, "dead", False)  # a replica back, once the loop runs
        await asyncio.wait_for(asking, 30)  # (returns: a live replica)
        assert k.look is None  # (the look's callback ran)
        revival.close()

    asyncio.run(main())


def test_a_request_waiting_for_a_lost_replica_ends_its_wait_when_serve_stops() -> None:
    """Serve's first signal stops its workers being started again (`halt`): a request
    waiting in `ready` goes on at once to its call (a 502: no live replica), where it
    waited on for WAIT_S, holding serve's stop as long, for a worker nothing would
    start again."""
    session, link = _session()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        revival = Revival(session, loop, lambda lk: None)
        k = revival.keys.setdefault("web", _Key())
        k.last = time.monotonic()  # (a look just made: the request waits for the next)
        asking = asyncio.ensure_future(revival.ready("pid@http"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not asking.done() and k.asking == 1  # (it waits)
        revival.halt("serve is stopping")
        await asyncio.wait_for(asking, 30)  # (returns: no NoReplicaError of a full wait)
        assert link.dead and not session.dispatchers["pid@http"].rejoins
        assert revival.after_loss("pid@http")[1]  # (web-0's end unknown: retry later)
        session.ended["web-0"] = "was killed by signal 9 (SIGKILL)"
        assert revival.after_loss("pid@http") == (
            "; worker web-0 was killed by signal 9 (SIGKILL); not started again (serve "
            "is stopping): this route answers 502 until serve is restarted", False)
        revival.close()

    asyncio.run(main())
