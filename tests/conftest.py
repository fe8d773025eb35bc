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


def _no_hypothesis_deadline() -> None:
    """Hypothesis's tests without its per-example deadline (200 ms by default): a
    deadline is a timing assertion, which the suite does not make, and a loaded machine
    (two test processes on two busy CPUs) went past it for a test of parsing."""
    from hypothesis import settings

    settings.register_profile("polybus", deadline=None)
    settings.load_profile("polybus")


_no_hypothesis_deadline()


def pytest_configure(config: pytest.Config) -> None:
    """The suite runs as a terminal's Python would, with Ctrl-C a KeyboardInterrupt, even
    when started in the background by a shell without job control (``make test &``, a
    CI job), which starts it with SIGINT ignored: Python leaves an inherited ignored
    SIGINT ignored, in this process and in every process a test starts, and the tests
    of Ctrl-C (a time limit's, a module's import) then waited for nothing. (What polybus
    does under an ignored SIGINT is tested where it is set so.) Set before xdist starts
    its workers, which inherit it."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(config, "workerinput"):  # (once, in the process xdist's workers come from)
        _mpi_files_apart(config)
        _compiled_ahead()
        if config.getoption("numprocesses", None):
            _rewritten_ahead(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first, the others in their order: pytest-xdist's workers
    share the work by taking each other's last tests, so a long test left for the end
    kept one worker busy alone while the other had nothing left to take."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # (stable)


# Open MPI's shared-memory files (sm_segment.HOST.UID.JOB.RANK), which its ranks make in
# /dev/shm and remove at MPI's finalize: a process that never gets there leaves its own.
# One was this suite's: a test that imported mpi4py's MPI in its pytest-xdist worker made
# the worker an MPI singleton, and the worker ends without MPI_Finalize (test_bench_ep.py
# loads libmpi without MPI_Init now, as bench/peers does). A job a test ends by a signal
# (a rank killed, a launcher stopped) would leave them too: this directory is the net.
_MPI_BACKING = ("OMPI_MCA_btl_sm_backing_directory", "OMPI_MCA_osc_sm_backing_directory")


def _mpi_files_apart(config: pytest.Config) -> None:
    """Every MPI job the suite starts keeps its shared-memory files in a directory of the
    session's own (inherited by xdist's workers and every process a test starts), removed
    when the session ends, so none is left in /dev/shm. Not where the caller chose one.
    (Its name has no "polybus" in it: test_shm_lifetimes.py finds none of polybus there.)"""
    import shutil
    import tempfile

    if any(v in os.environ for v in _MPI_BACKING):
        return
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # (a tmpfs, as MPI's)
    stale_mpi_dirs_removed(base or tempfile.gettempdir())
    where = tempfile.mkdtemp(prefix=f"suite-mpi-{os.getpid()}-", dir=base)
    for v in _MPI_BACKING:
        os.environ[v] = where
    config.add_cleanup(lambda: shutil.rmtree(where, ignore_errors=True))


def stale_mpi_dirs_removed(base: str) -> list[str]:
    """Remove (and name) the `_mpi_files_apart` directories in ``base`` of sessions that
    ended without their cleanup (a pytest killed by a timeout left its empty directory in
    /dev/shm each time): those whose session's process (``suite-mpi-PID-...``) is gone."""
    import shutil

    gone = []
    for d in Path(base).glob("suite-mpi-*-*"):
        pid = d.name.split("-")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d.name)
        except PermissionError:  # (alive, another user's)
            continue
    return gone


def _compiled_ahead() -> None:
    """Every Python file of the project compiled to its ``__pycache__`` before the tests
    start. The suite starts well over a thousand Python processes (workers, runs,
    registries), each importing polybus from its sources: where nothing writes bytecode
    (a fresh clone under ``PYTHONDONTWRITEBYTECODE``), each compiled the ~120 modules it
    imports again, ~0.13 s of CPU a worker (a third of its start). Files already
    compiled and unchanged are only looked at; a file that does not compile is left to
    its test to say so."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for part in ("src", "examples", "tests"):
        compileall.compile_dir(root / part, quiet=2)


def _rewritten_ahead(config: pytest.Config) -> None:
    """The test files' code with pytest's assertions rewritten (pytest's own cache,
    beside their bytecode), made before pytest-xdist's workers start, by this process
    and a child of it, half each: each worker made it all for itself (~9 s of CPU at
    its start, the two at once, where nothing writes bytecode), and now reads it
    (~1.5 s). Only the test files this run collects; nothing at all where pytest's
    internals are not as used here (the workers then rewrite as they did)."""
    try:
        from _pytest.assertion import rewrite as rw

        state = config.stash[rw.assertstate_key]
        tail, cache_dir = rw.PYC_TAIL, rw.get_cache_dir
        read, make, write = rw._read_pyc, rw._rewrite_test, rw._write_pyc
    except (ImportError, AttributeError, KeyError):  # (KeyError: --assert=plain)
        return
    here = config.invocation_params.dir
    files: set[Path] = set(Path(__file__).resolve().parent.rglob("conftest.py"))
    for arg in config.args:
        where = (here / arg.split("::")[0]).resolve()
        files.update(where.rglob("test_*.py") if where.is_dir() else
                     [where] if where.suffix == ".py" else [])
    todo = [(fn, cache_dir(fn) / (fn.name[:-3] + tail)) for fn in sorted(files)]
    todo = [(fn, pyc) for fn, pyc in todo if read(fn, pyc) is None]
    import threading

    def rewrite(some: list[tuple[Path, Path]]) -> None:
        for fn, pyc in some:
            try:
                pyc.parent.mkdir(exist_ok=True)
                write(state, *make(fn, config)[::-1], pyc)
            except Exception:  # (a file that does not compile: collecting it says so)
                pass

    child = os.fork() if len(todo) > 1 and threading.active_count() == 1 else -1
    if child == 0:
        try:
            rewrite(todo[1::2])
        finally:
            os._exit(0)  # (never on into pytest's session)
    rewrite(todo[0::2] if child > 0 else todo)
    if child > 0:
        os.waitpid(child, 0)


@pytest.fixture(autouse=True)
def _stop_signal_handlers_put_back() -> Iterator[None]:
    """A command's main called in this process (`polybus registry`, `worker`) sets its
    stop handlers and leaves them, as its process is about to end: put back, or a later
    test's real Ctrl-C in this process is only noted, never a KeyboardInterrupt."""
    import signal

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in sigs}
    yield
    for s, handler in before.items():
        if signal.getsignal(s) is not handler and handler is not None:
            signal.signal(s, handler)


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
    a minute; several tests check the same run), by whichever test process (pytest-xdist
    worker) asks first: the others wait for that run and read what it left in
    ``where``, a directory they share. A run that raised raises again for every test
    that asks for it."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.runs: dict[str, QuickRun | Exception] = {}

    def __call__(self, name: str) -> QuickRun:
        if name not in self.runs:
            try:
                self.runs[name] = self._shared(name)
            except Exception as exc:
                self.runs[name] = exc
                raise
        run = self.runs[name]
        if isinstance(run, Exception):
            raise run
        return run

    def _shared(self, name: str) -> QuickRun:
        """The session's run of ``name``: made here, under a lock the session's other
        test processes wait on, unless one of them made it (then read back). A run that
        ended without a record (its test timed out) is made again by the next asker."""
        import fcntl
        import traceback

        record = self.where / f"{name}.run.json"
        with open(self.where / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # (released as the file closes)
            if record.exists():
                return self._read(name, json.loads(record.read_text()))
            try:
                run = self._run(name)
            except Exception as exc:
                said = "".join(traceback.format_exception(exc))
                record.write_text(json.dumps({"raised": said}))
                raise
            record.write_text(json.dumps({"exit_code": run.exit_code,
                                          "left_behind": run.left_behind}))
            return run

    def _read(self, name: str, made: dict[str, Any]) -> QuickRun:
        if "raised" in made:
            raise RuntimeError(f"the quick run of {name} (made by another test process) "
                               f"raised:\n{made['raised']}")
        return self._quick_run(name, made["exit_code"], made["left_behind"])

    def _run(self, name: str) -> QuickRun:
        from polybus.bench.peers._proc import spawned_pids
        from polybus.cli.main import main as cli

        out = self.where / f"{name}.json"
        before = set(spawned_pids())
        code = cli(["bench", name, "--quick", "--json", str(out)])
        started = [p for p in spawned_pids() if p not in before]
        left = [p for p in started if not gone(p)]
        return self._quick_run(name, code, left)

    def _quick_run(self, name: str, code: int, left: list[int]) -> QuickRun:
        from polybus.bench.report import BenchResult

        out = self.where / f"{name}.json"
        d = json.loads(out.read_text()) if out.exists() else {}
        result = BenchResult.from_dict(d) if d else BenchResult(name)
        return QuickRun(name, code, d, result, left)


@pytest.fixture(scope="session")
def quick_bench(tmp_path_factory: pytest.TempPathFactory) -> QuickBenchmarks:
    """``quick_bench(NAME)``: the session's one quick run of benchmark NAME, shared by
    its test processes (under pytest-xdist each worker's base directory is inside the
    session's: the runs go beside them)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    where = root / "bench-quick"
    where.mkdir(exist_ok=True)
    return QuickBenchmarks(where)


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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """An empty directory with a short path, for a test's TMPDIR: a run puts its
    directory (and its Unix sockets, at most 107 bytes of path) in TMPDIR only when the
    path leaves room (engines/rundir.py), and pytest's own ``tmp_path`` can be too long
    for that (``/tmp/pytest-of-root/pytest-1119/popen-gw0/test_...``). Removed after."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="pbt-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
