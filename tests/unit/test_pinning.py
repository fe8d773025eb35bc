"""pinning.py in one process: what `check_here` checks where, and what `pinned_run`
gives back (every thread its own CPUs, `ENV` as it was), however the block ends."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus.config import load
from polybus.engines.launchenv import RANK_VARS
from polybus.errors import ConfigError
from polybus.pinning import ENV, can_pin, check_here, pin_check, pinned_run
from polybus.testing.apps import write_one_call_app

pytestmark = pytest.mark.skipif(
    not can_pin() or len(os.sched_getaffinity(0)) < 2,
    reason="pinning needs Linux's CPU affinity and 2 CPUs this process may run on")

NOT_HERE = 4095  # (a CPU number no test machine gives)


@pytest.fixture
def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@pytest.fixture
def no_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    for v in RANK_VARS:
        monkeypatch.delenv(v, raising=False)


@pytest.mark.usefixtures("no_rank")
def test_an_mpi_rank_that_serves_does_not_check_the_clients_cpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank runs `polybus run`; only rank 0 runs the client. A launcher that binds
    each rank to CPUs of its own (Open MPI's default for 2 ranks, srun --cpu-bind) gave
    rank 1 CPUs other than the client's: rank 1 refused the client's cpus, and the job
    hung (rank 0 waited for it)."""
    app = load(write_one_call_app(tmp_path), ("cluster.engine=mpi",
                                              f"modules.client.cpus=[{NOT_HERE}]"))
    with pytest.raises(ConfigError) as err:  # (rank 0: the client runs here)
        check_here(app)
    assert err.value.key == "modules.client.cpus"
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    with pytest.raises(ConfigError):
        check_here(app)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")  # (a rank that serves a replica)
    check_here(app)
    # the local engine's client runs where `run` is called, whatever a launcher says
    check_here(load(write_one_call_app(tmp_path / "other"),
                    (f"modules.server.cpus=[{NOT_HERE}]",)), registry=True)
    with pytest.raises(ConfigError):
        check_here(load(write_one_call_app(tmp_path / "local"),
                        (f"modules.client.cpus=[{NOT_HERE}]",)))


@pytest.fixture
def other_thread(cpus: list[int]) -> Iterator[tuple[threading.Event, list[int]]]:
    """A thread of this process on ``cpus[1]`` alone (set by itself), waiting until told
    to end; its thread id."""
    ready, end = threading.Event(), threading.Event()
    tid: list[int] = []

    def body() -> None:
        os.sched_setaffinity(0, {cpus[1]})
        tid.append(threading.get_native_id())
        ready.set()
        end.wait(30)

    t = threading.Thread(target=body, name="other", daemon=True)
    t.start()
    try:
        assert ready.wait(10)
        yield end, tid
    finally:
        end.set()
        t.join(10)


def test_each_thread_gets_its_own_cpus_back(
        cpus: list[int], other_thread: tuple[threading.Event, list[int]]) -> None:
    """Every thread was given the calling thread's CPUs at the end: a thread the program
    had placed elsewhere lost its placement (docs: each thread gets its CPUs back)."""
    _, [tid] = other_thread
    mine = os.sched_getaffinity(0)
    with pinned_run(frozenset({cpus[0]}), "modules.client.cpus"):
        assert os.sched_getaffinity(tid) == {cpus[0]}  # (every thread, while pinned)
        assert os.sched_getaffinity(0) == {cpus[0]}
    assert os.sched_getaffinity(tid) == {cpus[1]}
    assert os.sched_getaffinity(0) == mine


def test_a_block_that_raises_gives_the_cpus_and_env_back(cpus: list[int]) -> None:
    mine = os.sched_getaffinity(0)
    had = os.environ.get(ENV)
    with pytest.raises(KeyboardInterrupt), pinned_run(frozenset({cpus[0]}), "k"):
        assert os.environ.get(ENV) is not None
        raise KeyboardInterrupt
    assert os.sched_getaffinity(0) == mine
    assert os.environ.get(ENV) == had


def test_a_cpu_not_here_pins_nothing_and_leaves_env_alone(cpus: list[int]) -> None:
    mine = os.sched_getaffinity(0)
    had = os.environ.get(ENV)
    with pytest.raises(ConfigError) as err, pinned_run(frozenset({NOT_HERE}), "k.cpus", "f"):
        pytest.fail("the block ran")
    assert (err.value.key, err.value.file) == ("k.cpus", "f")
    assert os.sched_getaffinity(0) == mine
    assert os.environ.get(ENV) == had


@pytest.mark.usefixtures("no_rank")
def test_a_cpu_not_here_in_the_file_is_said_at_its_line(tmp_path: Path) -> None:
    """Every other mistake in a configuration names the line that wrote it; this one
    named the file alone (`polybus run`, `polybus check`)."""
    path = write_one_call_app(tmp_path, server_keys=f"cpus = [{NOT_HERE}]")
    line = 1 + path.read_text().splitlines().index(f"cpus = [{NOT_HERE}]")
    with pytest.raises(ConfigError) as err:
        check_here(load(path))
    assert (err.value.file, err.value.line) == (str(path), line)
    assert err.value.key == "modules.server.cpus"
    # (an override's is said to be the override's)
    with pytest.raises(ConfigError) as err:
        check_here(load(path, ("modules.server.cpus=[0]", f"modules.client.cpus=[{NOT_HERE}]")))
    assert (err.value.file, err.value.line) == ("--set", None)


@pytest.mark.usefixtures("no_rank")
def test_workers_of_a_registry_in_the_file_are_not_checked_here(tmp_path: Path) -> None:
    """With ``[cluster] registry`` the replicas are workers started by hand, as with
    ``registry=``: their cpus were checked against this machine, and the run and
    `polybus check` refused a CPU only the workers' hosts have."""
    tail = '[cluster]\nregistry = "127.0.0.1:9"\n'
    app = load(write_one_call_app(tmp_path, tail=tail), (f"modules.server.cpus=[{NOT_HERE}]",))
    check_here(app)
    with pytest.raises(ConfigError) as err:  # (the client runs here: still checked)
        check_here(load(write_one_call_app(tmp_path / "c", tail=tail),
                        (f"modules.client.cpus=[{NOT_HERE}]",)))
    assert err.value.key == "modules.client.cpus"


@pytest.mark.usefixtures("no_rank")
def test_cpus_said_to_be_ignored_is_not_checked(tmp_path: Path) -> None:
    """On a module called in the client (replication = 0) cpus is said to be ignored
    (config/inclient.py); the run was refused for it all the same."""
    app = load(write_one_call_app(tmp_path), ("modules.server.replication=0",
                                              f"modules.server.cpus=[{NOT_HERE}]"))
    assert [n.key for n in app.notes] == ["modules.server.cpus"]
    check_here(app)


def test_under_a_launcher_a_cpu_not_here_says_the_launcher_may_have_bound_it(
        monkeypatch: pytest.MonkeyPatch, no_rank: None) -> None:
    """mpiexec binds each of 2 ranks to a core by default: `cpus` then fails on a CPU
    the machine has, and the hint named only the CPUs left."""
    with pytest.raises(ConfigError) as err:
        pin_check(frozenset({NOT_HERE}), frozenset({0}), "modules.server.cpus", None)
    assert err.value.hint is not None and "--bind-to" not in err.value.hint
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    with pytest.raises(ConfigError) as err:
        pin_check(frozenset({NOT_HERE}), frozenset({0}), "modules.server.cpus", None)
    assert err.value.hint is not None and "mpiexec --bind-to none" in err.value.hint


def test_a_thread_started_while_the_threads_are_moved_is_moved_too(
        cpus: list[int], other_thread: tuple[threading.Event, list[int]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread started by one not moved yet inherits the CPUs of before: one look at
    /proc/self/task left it there for the whole run. (Here the thread is hidden from
    the looks before the threads are moved, as one started just after them.)"""
    from polybus import pinning

    _, [tid] = other_thread
    real = pinning._tasks
    looks: list[int] = []

    def tasks() -> list[int]:
        looks.append(1)
        return [t for t in real() if t != tid or len(looks) > 2]

    monkeypatch.setattr(pinning, "_tasks", tasks)
    with pinned_run(frozenset({cpus[0]}), "modules.client.cpus"):
        assert os.sched_getaffinity(tid) == {cpus[0]}


def test_pinned_thread_moves_the_caller_alone_and_gives_back_what_started_in_it(
        cpus: list[int]) -> None:
    """The benchmarks' pin (bench/placement.py, bench_client.py): a thread started in the
    block, and still alive after it, was left on the block's CPU for the rest of the
    process (a session's, a pool's), beside every later benchmark of `bench all`."""
    from polybus.pinning import pinned_thread

    stop = threading.Event()
    seen: list[frozenset[int]] = []
    with pinned_thread({cpus[1]}):
        assert os.sched_getaffinity(0) == {cpus[1]}
        late = threading.Thread(target=stop.wait, daemon=True)
        late.start()  # (inherits the block's CPUs)
        assert late.native_id is not None
        seen.append(frozenset(os.sched_getaffinity(late.native_id)))
    try:
        assert seen == [frozenset({cpus[1]})]
        assert os.sched_getaffinity(0) == set(cpus)
        assert os.sched_getaffinity(late.native_id) == set(cpus)
    finally:
        stop.set()
        late.join()
