"""The chaos harness: a registry, worker processes and client sessions that tests damage.

Every process a test starts is recorded here and SIGKILLed (by its PID) and reaped in
the fixture's finally, whatever the test did. Workers record each execution in a side
file of their own (see app/server.py) so executions are counted outside the runtime.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.client.session import Session
from polybus.config import load
from polybus.config.model import AppConfig
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.token import ENV, make_token

APP = Path(__file__).parent / "app" / "app.toml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.side = tmp / "side"
        self.side.mkdir()
        self.token = make_token()
        self.env = dict(os.environ, **{ENV: self.token.decode(), "POLYBUS_CHAOS_DIR": str(self.side)})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sessions: list[Session] = []
        self.service: RegistryService | None = None
        self.registry = ""
        self.overrides: tuple[str, ...] = ()

    # -- parts ---------------------------------------------------------------------
    def app(self, *overrides: str) -> AppConfig:
        self.overrides = overrides
        return load(APP, overrides)

    def embedded_registry(self, ttl: float = 3.0) -> str:
        self.service = RegistryService(self.token, "tcp://127.0.0.1:0", ttl=ttl)
        self.registry = f"{self.service.address.host}:{self.service.address.port}"
        return self.registry

    def registry_process(self, port: int, ttl: float = 3.0) -> subprocess.Popen[bytes]:
        self.registry = f"127.0.0.1:{port}"
        proc = self.start("registry", [sys.executable, "-m", "polybus", "registry",
                                       "--listen", self.registry, "--ttl", str(ttl)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            probe = RegistryClient(self.registry, self.token, timeout=1)
            try:
                probe.resolve()
                return proc
            except Exception:
                assert proc.poll() is None, "registry process exited"
                time.sleep(0.05)
            finally:
                probe.close()
        raise AssertionError("registry did not come up")

    def start(self, key: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"{key}.err", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log, env=self.env)
        log.close()
        if key in self.procs:  # keep the earlier process too, so it is still reaped
            old = self.procs.pop(key)
            self.procs[f"{key}@{old.pid}"] = old
        self.procs[key] = proc
        return proc

    def worker(self, name: str, heartbeat: float = 0.5) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "polybus", "worker", "--registry", self.registry,
               "--config", str(APP), "--as", "server", "--name", name, "--exit-with-parent",
               "--heartbeat", str(heartbeat)]
        for o in self.overrides:
            cmd += ["--set", o]
        return self.start(name, cmd)

    def workers(self, n: int, heartbeat: float = 0.5) -> list[str]:
        names = [f"w{i}" for i in range(n)]
        for name in names:
            self.worker(name, heartbeat)
        self.wait_registered(names)
        return names

    def wait_registered(self, names: list[str], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        client = RegistryClient(self.registry, self.token, timeout=1)
        try:
            while True:
                try:
                    have = {r.name for r in client.resolve()}
                except Exception:
                    have = set()
                    client.close()
                if set(names) <= have:
                    return
                for n in names:
                    p = self.procs.get(n)
                    assert p is None or p.poll() is None, f"{n} exited: {self.stderr(n)}"
                assert time.monotonic() < deadline, f"not registered: {set(names) - have}"
                time.sleep(0.05)
        finally:
            client.close()

    def session(self, app: AppConfig) -> Session:
        s = Session(app, self.registry, self.token)
        self.sessions.append(s)
        return s

    # -- damage and evidence ---------------------------------------------------------
    def kill(self, key: str) -> None:
        proc = self.procs[key]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def executions(self, tag: str = "run") -> collections.Counter[int]:
        counts: collections.Counter[int] = collections.Counter()
        for f in self.side.glob("*.log"):
            for line in f.read_text().splitlines():
                t, _, i = line.partition(" ")
                if t == tag:
                    counts[int(i)] += 1
        return counts

    def stderr(self, key: str) -> str:
        p = self.tmp / f"{key}.err"
        return p.read_text(errors="replace") if p.exists() else ""

    def close(self) -> None:
        for s in self.sessions:
            try:
                s.close()
            except Exception:
                pass
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            if proc.stdout is not None:
                proc.stdout.close()
        if self.service is not None:
            self.service.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    try:
        yield h
    finally:
        h.close()
