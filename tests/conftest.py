"""Shared test settings: every test starts from a clean polybus client state; each
quick benchmark runs once per session (`quick_bench`), however many tests check it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from polybus.bench.report import BenchResult


@pytest.fixture(autouse=True)
def _no_active_session() -> Iterator[None]:
    """A test that fails inside a run must not leave its session active for the next."""
    yield
    from polybus.client.stubs import activate

    activate(None)


@pytest.fixture(autouse=True)
def _no_shared_segment_left() -> Iterator[None]:
    """A test that leaves a shared segment mapped (a channel not closed when it failed)
    fails itself, at its teardown: otherwise every later test in its process that
    counts segments would fail in its place."""
    from polybus.testing.conformance import memfd_mappings

    before = memfd_mappings()
    yield
    if memfd_mappings() > before:
        import gc

        gc.collect()
        left = memfd_mappings() - before
        assert left <= 0, f"this test left {left} shared segment(s) mapped or open"


@dataclass(frozen=True)
class QuickRun:
    """One ``polybus bench NAME --quick --json F``, run in this process through the CLI."""

    name: str
    exit_code: int
    json: dict[str, Any]
    """The file the CLI wrote, parsed."""
    result: BenchResult
    """The same file read back (BenchResult.from_dict)."""
    left_behind: list[int]
    """Peer children (bench.peers spawn) the run started that were still there right
    after it ended; each must be gone."""


def gone(pid: int) -> bool:
    """A child process ``pid`` has ended (reaped here if it was a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # (0, 0) if still running; reaps it if a zombie
    except ChildProcessError:
        return True  # already reaped: no longer a child of ours
    return False


class QuickBenchmarks:
    """Each quick benchmark run once per test session, on first request (it takes up to
    20 s; several tests check the same run). A run that raised raises again for every
    test that asks for it."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.runs: dict[str, QuickRun | Exception] = {}

    def __call__(self, name: str) -> QuickRun:
        if name not in self.runs:
            try:
                self.runs[name] = self._run(name)
            except Exception as exc:
                self.runs[name] = exc
                raise
        run = self.runs[name]
        if isinstance(run, Exception):
            raise run
        return run

    def _run(self, name: str) -> QuickRun:
        from polybus.bench.peers._proc import spawned_pids
        from polybus.bench.report import BenchResult
        from polybus.cli.main import main as cli

        out = self.where / f"{name}.json"
        before = set(spawned_pids())
        code = cli(["bench", name, "--quick", "--json", str(out)])
        started = [p for p in spawned_pids() if p not in before]
        left = [p for p in started if not gone(p)]
        d = json.loads(out.read_text()) if out.exists() else {}
        result = BenchResult.from_dict(d) if d else BenchResult(name)
        return QuickRun(name, code, d, result, left)


@pytest.fixture(scope="session")
def quick_bench(tmp_path_factory: pytest.TempPathFactory) -> QuickBenchmarks:
    """``quick_bench(NAME)``: the session's one quick run of benchmark NAME."""
    return QuickBenchmarks(tmp_path_factory.mktemp("bench-quick"))


FORWARD_TOKEN = b"forward-test-token-0123456789abcdef"


@pytest.fixture
def echo_worker() -> Iterator[Any]:
    """A replica in this process serving ``echo`` (its arguments back, as a list) with
    two handlers, under `FORWARD_TOKEN` (for tests of forwarded values, held calls)."""
    from polybus.worker.options import ServeOptions
    from polybus.worker.runtime import WorkerRuntime

    rt = WorkerRuntime("w", {"echo": lambda *xs: list(xs)}, FORWARD_TOKEN,
                       options=ServeOptions(pool=2)).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def echo_peer(echo_worker: Any) -> Iterator[Any]:
    """A channel to `echo_worker`, authenticated, for a test to speak the protocol on."""
    from polybus.transport.endpoints import connect
    from polybus.wire.codec import Codec

    ch = connect(echo_worker.address, FORWARD_TOKEN, Codec())
    try:
        yield ch
    finally:
        ch.close()
