"""In-process cluster for the communication tests: a registry and worker runtimes on
threads, and a client Session built from a configuration written to a temp dir."""

from __future__ import annotations

import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from polybus.client.promise import CallPromise
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.config import load
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.token import make_token
from polybus.wire.messages import Replica
from polybus.worker.main import options_for
from polybus.worker.module import interfaces, load_module
from polybus.worker.runtime import WorkerRuntime

SERVER = '''
import threading

import numpy as np

RELEASED = threading.Event()  # set as the cluster closes: every gate is open then

def _gate(flag, seconds=10.0, every=0.0005):
    # until the file ``flag`` exists (a gate the test opens), looked at ``every``
    # seconds, the cluster closes, or ``seconds`` pass (a test that never opens it does
    # not wait for ever)
    import os
    import time
    end = time.monotonic() + seconds
    while not os.path.exists(flag) and not RELEASED.is_set() and time.monotonic() < end:
        time.sleep(every)

def mul(row, b):
    return row @ b

def scale(x, k):
    if k < 0:
        raise ValueError(f"negative scale {k}")
    return x * k

def add(x, y):
    return x + y

def double(x):
    return x * 2

def echo(x):
    return x

def bump(row, b):
    b += 1.0  # writes its operand in place
    return row @ b

def kinds(a, *rest, b=None, **extra):
    # which arguments arrived read-only: the cached ones (test_comm_cache)
    ro = lambda x: not x.flags.writeable
    total = float(a.sum() + sum(x.sum() for x in rest) + b.sum() + sum(v.sum() for v in extra.values()))
    return [ro(a), [ro(x) for x in rest], ro(b), {k: ro(v) for k, v in sorted(extra.items())},
            total]

def kinds_po(a, /, **extra):
    # a positional-only parameter beside **kwargs, which may take a keyword of its name
    ro = lambda x: not x.flags.writeable
    return [ro(a), {k: ro(v) for k, v in sorted(extra.items())}]

def held(row, b):
    # whether the operand arrived read-only, and which object it is (test_comm_cache)
    return [not b.flags.writeable, id(b)]

def nap(x, seconds):
    # x after ``seconds`` seconds, or given a path, once the file there exists (`_gate`)
    import time
    if isinstance(seconds, str):
        _gate(seconds)
    else:
        time.sleep(seconds)
    return x

def inner(xs, b=None):
    # what a list, tuple or dict argument holds at the replica: its kind, the sums of the
    # arrays among its items and whether each arrived read-only (a cached operand), and
    # b's sum (test_broadcast_nested)
    items = list(xs.values()) if isinstance(xs, dict) else list(xs)
    arrays = [x for x in items if isinstance(x, np.ndarray)]
    return [type(xs).__name__, [float(x.sum()) for x in arrays],
            [not x.flags.writeable for x in arrays], None if b is None else float(b.sum())]

def slow_double(x, delay):
    # a producer that takes its time (test_comm_forward, test_forward_held): ``delay``
    # seconds, or given a path, until the file there exists (`_gate`), having made the
    # file ``<path>.started`` as it began
    import time
    if isinstance(delay, str):
        open(delay + ".started", "w").close()
        _gate(delay)
    else:
        time.sleep(delay)
    return x * 2

def throw(kind, *args):
    # raises the built-in exception ``kind`` made of ``args`` (test_remote_types)
    import builtins
    raise getattr(builtins, kind)(*args)

def gated_double(x, flag):
    # a producer that answers as soon as the file ``flag`` exists, which the client
    # makes once every stage of its round is sent (test_comm_forward): `_gate`
    _gate(flag)
    return x * 2

def until(x, flag):
    # runs until the file ``flag`` exists (a call that looks hung), 60 s at most
    # (test_demand_abandoned): `_gate`
    _gate(flag, 60.0, every=0.005)
    return x
'''

CLOSE_S = 5.0  # how long a closing cluster waits for its replicas' threads, at most


class Cluster:
    def __init__(self, tmp: Path, toml: str, replicas: int = 1, transport: str = "tcp") -> None:
        (tmp / "server.py").write_text(SERVER)
        (tmp / "client.py").write_text("def main():\n    return None\n")
        (tmp / "app.toml").write_text(textwrap.dedent(toml))
        self.path = tmp / "app.toml"
        self.app = load(self.path)
        if len(self.app.modules["server"].replication) != replicas:
            # (the replicas started here are the run's: a session uses as many of those
            # registered as the configuration's replication, client/choosing.py)
            self.app = load(self.path, (f"modules.server.replication={replicas}",))
        self.token = make_token()
        # inproc: the registry too, so that every connection of the run is in-process
        self.registry = RegistryService(
            self.token, f"inproc://{tmp}/registry" if transport == "inproc"
            else "tcp://127.0.0.1:0", ttl=30.0)
        self.reg_client = RegistryClient(str(self.registry.address), self.token)
        self.runtimes: list[WorkerRuntime] = []
        self.tmp, self.transport = tmp, transport
        spec = self.app.modules["server"]
        module = load_module(spec.source, "polybus_test_comm_server")
        self.module = module
        self.functions = interfaces(module)
        for i in range(replicas):
            self.start_replica(f"server-{i}")
        self.sessions: list[Session] = []

    def start_replica(self, name: str) -> WorkerRuntime:
        spec = self.app.modules["server"]
        listen = ("tcp://127.0.0.1:0" if self.transport == "tcp"
                  else f"inproc://{self.tmp}/{name}" if self.transport == "inproc"
                  else f"{self.transport}://{self.tmp}/{name}.sock")
        rt = WorkerRuntime(name, self.functions, self.token, listen,
                           options_for(spec, None, 1 << 30)).start()
        self.reg_client.register(Replica(name, "server", str(rt.address), sorted(self.functions)))
        self.runtimes.append(rt)
        return rt

    def session(self) -> Session:
        s = Session(self.app, str(self.registry.address), self.token)
        self.sessions.append(s)
        activate(s)
        return s

    def release(self) -> None:
        """Open every gate of the replicas' module: its events (``RELEASED``, which
        opens `_gate`'s files, and a test's own ``GATE``), so no call waits on one."""
        for value in list(vars(self.module).values()):
            if isinstance(value, threading.Event):
                value.set()

    def close(self) -> list[str]:
        """Close the cluster; the names of its replicas' threads still running
        `CLOSE_S` seconds on (a call no gate ends: `cluster` says so)."""
        # Gates first: a test that failed before it opened one left the call waiting in
        # a replica thread, polling, until the gate's own limit (10 s, 60 s), after the
        # test had ended (the stop leaves running calls to their daemon threads).
        self.release()
        activate(None)
        for s in self.sessions:
            s.close()
        for rt in self.runtimes:
            # (not again one a test stopped, as its kill: a second stop waited its whole
            # grace, 2 s, for a call still running in it, which nothing would answer)
            if not rt._stopping:
                rt.stop()
        deadline = time.monotonic() + CLOSE_S  # (their calls end: no thread left behind)
        for t in [t for rt in self.runtimes for t in rt._threads if t.ident is not None]:
            t.join(max(0.0, deadline - time.monotonic()))
        self.reg_client.close()
        self.registry.close()
        return [t.name for rt in self.runtimes for t in rt._threads if t.is_alive()]


@contextmanager
def cluster(tmp: Path, toml: str, replicas: int = 1, transport: str = "tcp") -> Iterator[Cluster]:
    c = Cluster(tmp, toml, replicas, transport)
    try:
        yield c
    except BaseException:
        c.close()  # (the test's own failure is what is said)
        raise
    left = c.close()
    assert not left, (f"replica threads still running {CLOSE_S} s after the cluster "
                      f"closed (a call no gate of its module ends): {left}")


def call(s: Session, name: str, *args: Any) -> Any:
    from polybus import wait

    return wait(s.call(name, args, {}))


def heard(c: Cluster, s: Session, *ps: Any) -> None:
    """Once each of ``ps`` has its replica told what to do with its answer (a Forward, or
    a Keep): it is then answered ``Ref``. (A call to a busy replica is written with the
    next ones: each wait writes them.)"""
    deadline = time.monotonic() + 10
    while not all(any(where[1] == p._rec.id for where in _replica(c, p).forwarding.targets)
                  for p in ps):
        assert time.monotonic() < deadline, "a Forward was not heard"
        s.reactor.flush_all()
        time.sleep(0.005)


def _replica(c: Cluster, p: Any) -> WorkerRuntime:
    name = p._rec.link.name
    return next(rt for rt in c.runtimes if rt.name == name)


def opened_at_wait(monkeypatch: pytest.MonkeyPatch, gate: Path) -> None:
    """Make the file ``gate`` the moment the client waits for a call's promise (any use
    of its value: `CallPromise.__polybus_value__`), so that a producer gated on it
    (``gated_double``) is unanswered at least until the client waits for it. For a call
    that waits for its promises where it is made, by design (a sync consumer; a
    priority that reads one), which a gate opened after the call would hold for ever."""
    real = CallPromise.__polybus_value__

    def opening(p: CallPromise) -> Any:
        gate.touch()
        return real(p)

    monkeypatch.setattr(CallPromise, "__polybus_value__", opening)
