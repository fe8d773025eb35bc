"""The local engine: an embedded registry and worker processes on this machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from polybus.config.model import AppConfig
from polybus.engines.base import Cluster
from polybus.errors import PolybusError, TransportError
from polybus.registry.client import RegistryClient
from polybus.registry.service import RegistryService
from polybus.token import ENV, make_token

START_TIMEOUT = 60.0


class LocalEngine:
    """Starts ``replication`` worker processes per server module; stops every one of them."""

    def __init__(self, app: AppConfig, overrides: tuple[str, ...] = ()) -> None:
        self.app = app
        self.overrides = overrides
        self.token = make_token()
        self.registry: RegistryService | None = None
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.sockdir: Path | None = None  # private (0700) home of ipc/shm socket files

    def start(self) -> Cluster:
        t0 = time.perf_counter()
        try:
            self.registry = RegistryService(
                self.token, f"tcp://{self.app.cluster.listen_host}:0",
                ttl=3 * self.app.cluster.heartbeat)
            for module in self.app.servers():
                for replica in module.replication:
                    self._spawn(module.key, replica.name)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return Cluster(str(self.registry.address), self.token, time.perf_counter() - t0)

    def _spawn(self, key: str, name: str) -> None:
        assert self.registry is not None
        log = Path(tempfile.mkstemp(prefix=f"polybus-{name}-", suffix=".log")[1])
        proc: subprocess.Popen[bytes] | None = None
        try:
            cmd = [sys.executable, "-m", "polybus", "worker", "--registry",
                   str(self.registry.address), "--config", str(self.app.path), "--as", key,
                   "--name", name, "--exit-with-parent", "--parent", str(os.getpid())]
            for scheme in transports_for(self.app, key):
                cmd += ["--listen", self._address(scheme, len(self.procs))]
            for o in self.overrides:
                cmd += ["--set", o]
            env = dict(os.environ, **{ENV: self.token.decode()})
            with open(log, "wb") as err:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=err, env=env)
        finally:  # (a Ctrl-C here too: stop() ends what is listed and removes its log)
            if proc is not None:
                self.procs.append((name, proc, log))
            else:
                log.unlink(missing_ok=True)

    def _address(self, scheme: str, index: int) -> str:
        if scheme == "tcp":
            return f"tcp://{self.app.cluster.listen_host}:0"
        if self.sockdir is None:
            # mkdtemp makes it 0700: only this user can reach the sockets (each also 0600).
            self.sockdir = Path(tempfile.mkdtemp(prefix="polybus-"))
        return f"{scheme}://{self.sockdir / f'{index}.{scheme}'}"

    def _wait_ready(self) -> None:
        assert self.registry is not None
        expected = {name for name, _, _ in self.procs}
        client = RegistryClient(str(self.registry.address), self.token)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while True:
                for name, proc, log in self.procs:
                    if proc.poll() is not None:
                        raise PolybusError(_start_failure(name, proc.returncode, log))
                have = {r.name for r in client.resolve()}
                if expected <= have:
                    return
                if time.monotonic() > deadline:
                    missing = ", ".join(sorted(expected - have))
                    raise TransportError(f"workers {missing} did not register within "
                                         f"{START_TIMEOUT:g} s")
                time.sleep(0.02)
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM every worker this engine started, SIGKILL what is left after 3 s, or
        at once if the wait is interrupted (a second Ctrl-C): the logs, the socket
        directory and the registry go either way."""
        try:
            for _, proc, _ in self.procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 3.0
            for _, proc, _ in self.procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self._release()

    def _release(self) -> None:
        for _, proc, log in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            try:
                log.unlink()
            except OSError:
                pass
        self.procs.clear()
        if self.sockdir is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            self.sockdir = None
        if self.registry is not None:
            self.registry.close()
            self.registry = None


def transports_for(app: AppConfig, key: str) -> list[str]:
    """What a replica of module ``key`` listens on: its module's transport first (its
    main address), then any other a binding to it asks for, and always tcp."""
    out: list[str] = [app.modules[key].transport]
    for b in app.bindings:
        if b.module == key:
            use = app.modules[b.user].use.get(b.name)
            if use is not None and use.transport and use.transport not in out:
                out.append(use.transport)
    if "tcp" not in out:
        out.append("tcp")
    return out


_ERROR_LINE = "polybus worker: error: "


def _start_failure(name: str, status: int, log: Path) -> str:
    """Why worker ``name`` did not start: the error it reported (a module that does not
    import, a bad option) without the rest of its output, else the end of its output."""
    text = _tail(log)
    at = text.find(_ERROR_LINE)
    if at >= 0:
        return f"worker {name} could not start: {text[at + len(_ERROR_LINE):]}"
    return f"worker {name} exited with status {status} while starting:\n{text}"


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"
