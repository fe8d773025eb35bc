"""A module's ``cpus`` applied: this process, every thread of it, pinned to those CPUs.

A replica pins itself as it starts (worker/main.py), before its threads and its process
pool exist, so all of them run there. The client pins the process that runs the program
for the run's length (runner.py), once its local replicas are started (they must not
inherit the client's CPUs), and gives every thread the CPUs it had before when the run
ends. While it is pinned, ``POLYBUS_CPUS_BEFORE`` in its environment names those CPUs,
so that a replica it starts later (a nested run's) without ``cpus`` of its own runs
where it would have, not on the client's CPUs.

Linux's CPU affinity is per thread: ``os.sched_setaffinity(0, ...)`` moves the calling
thread alone, and threads inherit the mask of the thread that starts them. So every
task in /proc/self/task is moved. Elsewhere (macOS has no affinity call) nothing is
pinned, and the configuration's loading says so once (config/notes.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from polybus.config import placed
from polybus.config.cpus import can_pin, cpu_list, read_cpu_list
from polybus.engines.launchenv import launched_rank
from polybus.errors import ConfigError

if TYPE_CHECKING:
    from polybus.config.model import AppConfig

__all__ = ["ENV", "allowed", "can_pin", "check_here", "pin", "pin_check", "pinned_run",
           "pinned_thread", "thread_cpus", "unpin_inherited"]

ENV = "POLYBUS_CPUS_BEFORE"
# how many times the threads are listed at most while they are moved: threads that go
# on starting others for good (each started by a moved one, so placed already) are
# not chased for ever
LOOKS = 8


def allowed() -> frozenset[int]:
    """The CPUs a ``cpus`` here may name: those this process may run on, or, in a
    process started by a pinned client, those the client could run on before."""
    before = _before()
    return before if before is not None else frozenset(os.sched_getaffinity(0))


def _before() -> frozenset[int] | None:
    text = os.environ.get(ENV)
    if not text:
        return None
    try:
        return frozenset(read_cpu_list(text))
    except ConfigError:  # (not ours to judge: left as if unset)
        return None


def _tasks() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # (no /proc: the calling thread alone)
        return [0]


def thread_cpus() -> list[list[int]]:
    """The CPU sets of this process's threads, each sorted, without repeats (one set:
    every thread may run on the same CPUs). What a program prints to see its ``cpus``."""
    return [list(c) for c in sorted({tuple(sorted(m)) for m in _masks().values()})]


def _move(cpus: frozenset[int]) -> None:
    """Every thread on ``cpus`` (`_restore` with no thread's own CPUs kept); an error
    moving one that has not ended is raised."""
    _restore({}, cpus, ProcessLookupError)


def pin(cpus: frozenset[int], key: str, file: str | None = None) -> None:
    """Run every thread of this process, and those it starts later, on ``cpus`` (the
    value of ``key``; nothing where nothing can be pinned). ConfigError naming ``key``
    if a CPU is not one this process may run on."""
    if can_pin():
        pin_check(cpus, allowed(), key, file)
        _move(cpus)


def check_here(app: AppConfig, registry: bool = False) -> None:
    """Before a run starts anything: the CPUs of each process it would start on this
    machine (the client; the local engine's replicas, unless ``registry`` or
    ``[cluster] registry``: workers by hand; not a module called in the client, whose
    ``cpus`` is ignored: config/inclient.py) are ones this process may run on; else
    ConfigError naming the first module's ``cpus`` that names another, said where it
    was written (`config.placed`: at its line, or the overrides). Under the mpi engine
    every rank runs this, and only rank 0 runs the client: a rank that serves a replica
    checks nothing here (its own ``cpus`` are checked as its replica starts), since a
    launcher may have bound each rank to CPUs of its own."""
    if not can_pin():
        return
    client_here = app.cluster.engine != "mpi" or not launched_rank()  # (None, or 0)
    registry = registry or app.cluster.registry is not None  # (either: workers by hand)
    may = allowed()
    for module, m in app.modules.items():
        want = m.cpus_of(None)
        if want is not None and ((module == app.client and client_here) or (
                m.replication and not registry and app.cluster.engine == "local")):
            try:
                pin_check(want, may, f"modules.{module}.cpus", None)
            except ConfigError as exc:
                raise placed(exc, app) from None


def pin_check(cpus: frozenset[int], may: frozenset[int], key: str, file: str | None) -> None:
    """ConfigError naming ``key`` if ``cpus`` holds a CPU outside ``may``."""
    if outside := sorted(cpus - may):
        some = ", ".join(map(str, outside[:8])) + (", ..." if len(outside) > 8 else "")
        hint = f"name CPUs from {cpu_list(may)}, or leave cpus out"
        if launched_rank() is not None:  # (mpiexec binds 2 ranks to a core each, unasked)
            hint += ("; a launcher that binds each rank to CPUs leaves it those alone: "
                     "start it unbound (mpiexec --bind-to none, srun --cpu-bind=none)")
        raise ConfigError(f"CPU {some} is not one this process may run on here "
                          f"({os.uname().nodename}: CPUs {cpu_list(may)})",
                          file=file, key=key, hint=hint)


def unpin_inherited() -> None:
    """In a process started by a pinned client, with no ``cpus`` of its own: run where
    the client could before it was pinned (`ENV`), not on the client's CPUs."""
    before = _before()
    os.environ.pop(ENV, None)  # (not passed on: this process is not the client)
    if before is not None and can_pin():
        with contextlib.suppress(OSError):
            _move(before)


@contextlib.contextmanager
def pinned_run(cpus: frozenset[int] | None, key: str, file: str | None = None
               ) -> Iterator[None]:
    """The client's ``cpus`` for the block: every thread of this process on them (as
    `pin`, checked first); at its end, however it ends, each thread back on the CPUs
    it had before (one started meanwhile: those the calling thread had), and `ENV` as
    it was."""
    if cpus is None or not can_pin():
        yield
        return
    pin_check(cpus, allowed(), key, file)
    env = os.environ.get(ENV)
    mine = frozenset(os.sched_getaffinity(0))
    masks = _masks()
    try:  # (from here: an interrupt anywhere still gives everything back)
        if env is None:
            os.environ[ENV] = cpu_list(mine)
        _move(cpus)
        yield
    finally:
        if env is None:
            os.environ.pop(ENV, None)
        _restore(masks, mine)


def _masks() -> dict[int, frozenset[int]]:
    """The CPUs of each thread of this process, by thread id."""
    out: dict[int, frozenset[int]] = {}
    for tid in _tasks():
        with contextlib.suppress(ProcessLookupError):  # (a thread that ended meanwhile)
            out[tid] = frozenset(os.sched_getaffinity(tid))
    return out


def _restore(masks: dict[int, frozenset[int]], other: frozenset[int],
             ignore: type[OSError] = OSError) -> None:
    """Each thread on its CPUs in ``masks``, a thread not there on ``other``: looked for
    again until none is new (`LOOKS` times at most), since a thread started by one not
    moved yet inherits the CPUs of before. ``ignore``: the errors of a thread passed
    over (by default also a CPU since taken away; `_move`: only one that ended)."""
    done: set[int] = set()
    for _ in range(LOOKS):
        if not (new := [t for t in _tasks() if t not in done]):
            break
        for tid in new:
            with contextlib.suppress(ignore):
                os.sched_setaffinity(tid, masks.get(tid, other))
            done.add(tid)


@contextlib.contextmanager
def pinned_thread(cpus: set[int] | frozenset[int] | None) -> Iterator[None]:
    """The calling thread alone on ``cpus`` for the block (the benchmarks' client and
    launcher: what they start meanwhile, processes and threads, inherits it); at its
    end the calling thread, and every thread started meanwhile, back on the CPUs the
    calling thread had. (A thread started in the block and left pinned, a session's or
    a pool's, kept the CPU for the rest of the process: every later benchmark in a
    `polybus bench all` ran beside it.)"""
    if cpus is None or not can_pin():
        yield
        return
    before = frozenset(os.sched_getaffinity(0))
    known = set(_tasks())
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        for tid in [0, *(t for t in _tasks() if t not in known)]:
            with contextlib.suppress(OSError):  # (ended meanwhile)
                os.sched_setaffinity(tid, before)
