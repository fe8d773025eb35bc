"""When a lost replica is looked for again. A replica lost while the looks for another
lost one of its module have grown far apart is looked for at most LOOK_S after the last
look, as any loss is: the looks start close together again (http/revival.py for serve,
client/rejoin.py for a run at a shared registry). A worker of the module that registers
at serve's own registry brings the next look forward the same way.

In-process, with a session made of the few parts a loss reads; nothing dialled."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from polybus.client.rejoin import Rejoin
from polybus.client.rejoin import _Key as RejoinKey
from polybus.client.revive import LOOK_MAX_S, LOOK_S
from polybus.errors import ConnectionLostError
from polybus.http.revival import Revival
from polybus.http.revival import _Key as RevivalKey
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.wire.messages import Replica


def _session() -> tuple[Any, Any, Any]:
    """Two replicas of module web: web-0 lost long ago, web-1 live (about to be lost)."""
    lost = SimpleNamespace(dead=True, name="web-0", module="web")
    live = SimpleNamespace(dead=False, name="web-1", module="web")
    d = SimpleNamespace(links=[lost, live], interface="pid@http", _backlog=[],
                        _index={id(lost): 0, id(live): 1}, rejoins=False)
    app = SimpleNamespace(modules={"web": SimpleNamespace(transport="tcp", pickle=False)},
                          cluster=SimpleNamespace(max_frame=1 << 20))
    session = SimpleNamespace(dispatchers={"pid@http": d}, links={"web": [lost, live]},
                              batchers=[], ended={}, entries={}, app=app, token=b"",
                              registry=SimpleNamespace(address="tcp://127.0.0.1:1"),
                              _wait=(0.0, 0.0))
    return session, lost, live


def test_serve_looks_for_a_replica_lost_while_its_looks_were_far_apart_soon() -> None:
    """web-1 lost with the looks 8 s apart (web-0 not back for a while): its first look
    came 8 s after the last, though web-1's worker, taken for dead while a call held its
    GIL, registered again a second later; the front door served on one replica fewer."""
    session, _, live = _session()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        revival = Revival(session, loop, lambda lk: None)
        k = revival.keys.setdefault("web", RevivalKey())
        k.gap, k.last = 8.0, time.monotonic()  # (a look just made, leaving web-0 empty)
        live.dead = True
        revival.lost(live, ConnectionLostError("web-1 sent nothing"))
        assert k.timer is not None
        assert k.timer.when() - loop.time() <= LOOK_S + 0.1, k.timer.when() - loop.time()
        assert k.gap == LOOK_S  # (then twice as far apart again, from the first)
        revival.close()

    asyncio.run(main())


def test_a_run_looks_for_a_replica_lost_while_its_looks_were_far_apart_soon() -> None:
    """The same in a run at a shared registry: the look after web-1's loss was planned
    at the last look's time plus its grown gap (up to LOOK_MAX_S)."""
    session, _, live = _session()
    rejoin = Rejoin(session, 5.0)
    try:
        k = rejoin.keys.setdefault("web", RejoinKey())
        k.gap, k.last = LOOK_MAX_S, time.monotonic()
        live.dead = True
        rejoin.lost(live, ConnectionLostError("web-1 sent nothing"))
        assert k.due is not None
        assert k.due - time.monotonic() <= LOOK_S + 0.1, k.due - time.monotonic()
        assert k.gap == LOOK_S
    finally:
        rejoin.close()


def test_serve_looks_for_its_lost_replicas_when_a_worker_of_their_module_registers() -> None:
    """Serve's engine started web-0's worker again (or web-0, taken for dead while a call
    held its GIL, answered again) and it registered: the look for it was the next the
    gaps planned, up to 10 s later, with no request waiting to bring it forward."""
    session, _, _ = _session()
    other = SimpleNamespace(dead=True, name="db-0", module="db")
    session.links["db"] = [other]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        revival = Revival(session, loop, lambda lk: None)
        k = revival.keys.setdefault("web", RevivalKey())
        k.gap, k.last = LOOK_MAX_S, time.monotonic()  # (looks 10 s apart by now)
        db = revival.keys.setdefault("db", RevivalKey())
        db.gap, db.last = LOOK_MAX_S, time.monotonic()
        revival.registered("web")
        assert k.timer is not None
        assert k.timer.when() - loop.time() <= LOOK_S + 0.1, k.timer.when() - loop.time()
        assert db.timer is None and db.gap == LOOK_MAX_S  # (another module's: as it was)
        # One registered while a look was under way (it may have asked before): the
        # look after it comes LOOK_S after it, not twice its gap.
        k.timer.cancel()
        k.timer, k.gap = None, LOOK_MAX_S
        look: asyncio.Future[Any] = loop.create_future()
        k.look, k.last = look, time.monotonic()
        revival.registered("web")
        assert k.timer is None  # (not while the look is under way)
        look.set_result(([], []))  # (it found none)
        revival._looked("web", k, look)
        assert k.gap == LOOK_S
        assert k.timer is not None
        assert k.timer.when() - loop.time() <= LOOK_S + 0.1, k.timer.when() - loop.time()
        revival.close()

    asyncio.run(main())


def test_the_registry_tells_of_each_worker_registered() -> None:
    token = b"looks-registry-token-" + b"r" * 20
    told: list[str] = []
    with RegistryService(token) as service:
        service.on_register = lambda r: told.append(r.name)
        client = RegistryClient(f"{service.address.host}:{service.address.port}", token)
        try:
            client.register(Replica("web-0", "web", "tcp://127.0.0.1:1", ["pid"]))
            service.on_register = None
            client.register(Replica("web-1", "web", "tcp://127.0.0.1:2", ["pid"]))
        finally:
            client.close()
    assert told == ["web-0"]
