"""Conformance checks every engine passes: the same programs, started the engine's way,
give the same answers and the same errors.

An engine is given by how ``polybus run`` is launched under it (`command`): the local
engine runs the command as it is; the mpi engine runs it under ``mpiexec`` with one rank
for the client and one per replica (Open MPI's shared-memory transport: the ranks are
on this host); the ray engine starts a private Ray for the run, in a loopback-only
network namespace, or joins a head started once for several runs (testing/rayhead.py),
in that head's namespace; under the hosts engine a registry and a worker per replica
are started by hand first (testing/hosts.py). `CASES` are the checks; `check(engine, case, where)`
writes the case's program into ``where``, runs it (bounded in time; the process group
it starts is killed if it overruns) and raises AssertionError, with the run's output,
if the run does not behave as the case says. A new engine is added to `ENGINES` and
passes every case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from polybus.testing.apps import write_app
from polybus.testing.hosts import by_hand
from polybus.testing.rayhead import RayHead

__all__ = ["CASES", "DEATH", "ENGINES", "Case", "check", "command", "launch", "mpi_unavailable",
           "ray_unavailable", "session", "unavailable"]

ENGINES = ("local", "mpi", "ray", "hosts")
TIMEOUT_S = 120.0

_SERVER = """\
    import os

    import numpy as np


    def work(x):
        if x == "boom":
            raise ValueError("boom asked for")
        if x == "cpus":  # (the CPUs of every thread of this process)
            from polybus.pinning import thread_cpus

            return [os.getpid(), thread_cpus()]
        return [os.getpid(), x * 2]


    def scaled(b, i):
        return float(np.asarray(b).sum()) * i
"""
_CLIENT = """\
    import numpy as np
    from polybus import use, wait

    work = use("work")
    scaled = use("scaled")


    def main(kind="answers"):
        if kind == "boom":
            return wait(work("boom"))
        if kind == "cpus":
            got = [wait(p) for p in [work("cpus") for i in range(6)]]
            return {"processes": len({g[0] for g in got}),
                    "cpus": sorted({tuple(map(tuple, g[1])) for g in got})}
        if kind == "cached":
            b = np.arange(100_000, dtype=np.float64)
            return [wait(p) for p in [scaled(b, i) for i in range(6)]]
        got = [wait(p) for p in [work(i) for i in range(12)]]
        return {"processes": len({g[0] for g in got}), "values": [g[1] for g in got]}
"""
_TOML = """\
    [modules.server]
    source = "{source}"
    replication = {replicas}
    define.work = {{}}
    define.scaled = {{ cache = ["b"] }}
    {server}

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["{kind}"]
    use.work = {{ callstyle = "async" }}
    use.scaled = {{ callstyle = "async" }}

    [bind]
    "client.work" = "server.work"
    "client.scaled" = "server.scaled"
"""


@dataclass(frozen=True)
class Case:
    """A program (the client's ``kind``, lines added to ``[modules.server]``) and what
    its run must give: the result, or a failed run whose error output holds each of
    ``error``."""

    name: str
    kind: str
    server: str = ""
    result: Any = None
    error: tuple[str, ...] = ()
    server_source: str = _SERVER
    replicas: int = 2
    # more of the error, said where the engine starts the replicas itself (not hosts,
    # whose workers are started by hand: each says its own error where it was started)
    started_error: tuple[str, ...] = ()
    # the served module's file, and other files of the program: (name, text) each
    source: str = "server.py"
    files: tuple[tuple[str, str], ...] = ()


#: a replica that dies (SIGKILL) in the call the "boom" client makes, and in its retry on
#: the other replica; what each engine says of it differs (under mpi the launcher ends
#: the job), so `DEATH` says only the client's part, and tests add each engine's
DEATH = Case("a replica killed in a call", "boom", error=("every replica of work is gone",),
             server_source=_SERVER.replace(
                 '        if x == "boom":\n',
                 '        if x == "boom":\n            import signal\n'
                 '            os.kill(os.getpid(), signal.SIGKILL)\n'))
#: the served module in a package, importing its helper relatively (userpackage.py)
_PACKAGE = (("shapes/__init__.py", ""), ("shapes/serve/__init__.py", ""),
            ("shapes/twice.py", "def twice(x):\n    return x * 2\n"),
            ("shapes/serve/server.py", _SERVER.replace(
                "    import numpy as np\n",
                "    import numpy as np\n\n    from ..twice import twice\n",
            ).replace("x * 2]", "twice(x)]")))
_SUM = float(sum(range(100_000)))
# the first CPU this process may run on (Linux), which the pinned case's replicas take
_FIRST_CPU = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
_ANSWERS = {"processes": 2, "values": [2 * i for i in range(12)]}
CASES = (
    Case("answers over tcp", "answers", result=_ANSWERS),
    Case("answers over shm", "answers", 'transport = "shm"', result=_ANSWERS),
    Case("answers over ipc", "answers", 'transport = "ipc"', result=_ANSWERS),
    Case("cached operand", "cached", 'transport = "shm"', result=[_SUM * i for i in range(6)]),
    Case("a served module in a package", "answers", result=_ANSWERS,
         source="shapes/serve/server.py", files=_PACKAGE),
    Case("replicas pinned to a CPU", "cpus", f"cpus = [{_FIRST_CPU}]",
         result={"processes": 2, "cpus": [[[_FIRST_CPU]]]}),
    Case("a call that raises", "boom", error=("remote traceback", "ValueError: boom asked for")),
    Case("a module that does not import", "answers",
         server_source=("def work(x):\n    return x\n\n\ndef scaled(b, i):\n    return i\n\n\n"
                        "raise RuntimeError('this module refuses to load')\n"),
         error=("failed to import", "this module refuses to load"),
         # (the error as the worker says it, under every engine: not led by
         # "ModuleImportError:", as the mpi and ray engines led it)
         started_error=("could not start: module 'server' (",)),
)


def mpi_unavailable() -> str | None:
    """Why the mpi engine cannot be launched here, or None."""
    try:
        from polybus.bench.peers.mpi import mpiexec

        mpiexec()
    except Exception as exc:  # (PeerUnavailable: mpi4py or mpiexec missing)
        return str(exc)
    return None


def ray_unavailable() -> str | None:
    """Why the ray engine cannot be run here, or None. Ray binds its daemons to the
    host's outward address, so it is run only in a private loopback-only namespace."""
    from polybus.bench.peers import why_unavailable
    from polybus.bench.peers._driver import loopback_only_prefix

    why = why_unavailable("ray")
    if why:
        return why
    if not loopback_only_prefix():
        return ("Ray binds the host's outward address; it runs here only in a private "
                "loopback-only network namespace, which this machine does not permit")
    return None


def unavailable(engine: str) -> str | None:
    """Why ``engine`` cannot be run here, or None."""
    return {"mpi": mpi_unavailable, "ray": ray_unavailable}.get(engine, lambda: None)()


def command(engine: str, app: Path, replicas: int, out: Path,
            ranks: int | None = None, head: RayHead | None = None) -> list[str]:
    """The argv that runs ``app`` under ``engine``, writing its result to ``out``; under
    mpi on ``ranks`` ranks (by default the right number, one more than ``replicas``);
    under ray in ``head``'s namespace, to join it (given ``head.env``), if given."""
    run = [sys.executable, "-m", "polybus", "run", str(app), "--json", str(out), "--quiet"]
    if engine == "hosts":  # (given --registry by the caller: testing/hosts.py)
        return run
    run += ["--set", f'cluster.engine="{engine}"']
    if engine == "local":
        return run
    if engine == "ray" and head is not None:  # (beside the head, on loopback only)
        return [*head.prefix, *run]
    if engine == "ray":  # (a private Ray for the run, on loopback only)
        from polybus.bench.peers._driver import loopback_only_prefix

        return [*loopback_only_prefix(), *run]
    if engine != "mpi":
        raise ValueError(f"unknown engine {engine!r} (one of {ENGINES})")
    from polybus.bench.peers.mpi import BTLS, launcher

    # (in a private loopback-only network namespace where permitted, as the bench runs;
    # the ranks all on this host, so with Open MPI's shared-memory transport alone, as the
    # bench's: its TCP one, loaded by default for ranks on other hosts, took a second
    # to start in every rank)
    argv = [*launcher(), *BTLS["sm"]]
    return [*argv, "-n", str(1 + replicas if ranks is None else ranks), *run]


def launch(argv: list[str], cwd: Path,
           env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``argv`` in a session of its own (``env`` added to its environment), for at
    most ``TIMEOUT_S``; its exit status and its output (stdout, then stderr). Whatever
    is left of that session afterwards (a launcher's or Ray's daemons, however the run
    ended) is killed: only it."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            env=None if env is None else {**os.environ, **env})
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        stdout, stderr = b"", b""
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # (the session's group: this call's alone)
        except ProcessLookupError:
            pass
    if proc.returncode is None:
        _, stderr = proc.communicate()
        raise AssertionError(f"no end within {TIMEOUT_S:g} s: {argv}\n"
                             f"{stderr.decode(errors='replace')[-3000:]}")
    return proc.returncode, (stdout + stderr).decode(errors="replace")


@contextmanager
def session(argv: list[str], cwd: Path) -> Iterator[tuple[subprocess.Popen[str], IO[str]]]:
    """``argv`` running in a session of its own, its stdout and stderr one text stream,
    for the caller to read and signal (``os.killpg(proc.pid, ...)``: the group is the
    session's). Whatever is left of that session afterwards (a launcher, its ranks) is
    killed, however the caller ended: only it."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    assert proc.stdout is not None
    try:
        yield proc, proc.stdout
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # (the session's group: this caller's alone)
        except ProcessLookupError:
            pass
        proc.wait()
        proc.stdout.close()


def check(engine: str, case: Case, where: Path, head: RayHead | None = None) -> Any:
    """Run ``case`` under ``engine`` in ``where``; its result (AssertionError if the run
    does not do what the case says). Under ray, the run joins ``head`` if given (its
    actors started there, and killed when it ends), else starts a private Ray."""
    app = write_app(where, server=case.server_source, client=_CLIENT,
                    toml=_TOML.format(server=case.server, kind=case.kind,
                                      replicas=case.replicas, source=case.source))
    for name, text in case.files:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(textwrap.dedent(text))
    out = where / "result.json"
    argv = command(engine, app, case.replicas, out, head=head)
    if engine == "hosts":  # a registry and the workers started by hand first
        printed: list[str] = []
        with by_hand(app, case.replicas, printed) as use:
            status, text = launch([*argv, *use], where)
        text = "".join(printed) + text
    else:
        status, text = launch(argv, where, head.env if head and engine == "ray" else None)
    said = f"{engine}: {case.name}: exit status {status}\n{text[-3000:]}"
    if case.error:
        assert status != 0, said
        for words in case.error + (case.started_error if engine != "hosts" else ()):
            assert words in text, f"{said}\n(expected {words!r} in the output)"
        return None
    assert status == 0, said
    result = json.loads(out.read_text())["result"]
    assert result == case.result, f"{said}\nresult {result!r}, expected {case.result!r}"
    return result
