"""No worker outlives its run: not when the client raises, not on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from integration.conftest import (
    POLYBUS,
    Procs,
    alive,
    cli,
    descendants,
    env_with,
    finish,
    interruptible,
    kill_all,
    wait_gone,
)
from polybus.testing.apps import write_app

SERVER = """
    import os

    def pid():
        return os.getpid()
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = ["{pids}", {sleep}]
    use.pid = {{ callstyle = "sync" }}

    [bind]
    "client.pid" = "server.pid"
"""

CLIENT = """
    import time
    from polybus import use

    pid = use("pid")

    def main(path, sleep):
        pids = {pid() for _ in range(4)}
        with open(path, "w") as f:
            f.write(" ".join(map(str, sorted(pids))))
        if sleep:
            time.sleep(sleep)
        raise RuntimeError("the client failed on purpose")
"""


def _wait_for(pids_file: Path) -> None:
    """Until the client has written its replicas' pids (it is then running)."""
    deadline = time.monotonic() + 30
    while not (pids_file.exists() and pids_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)


def _running(tmp_path: Path, procs: Procs, sleep: float) -> tuple[subprocess.Popen[str], set[int]]:
    """A `polybus run` of CLIENT sleeping ``sleep`` s, once it runs; its workers' pids."""
    pids_file = tmp_path / "pids"
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(pids=pids_file, sleep=sleep))
    run = procs.start("run", app, "--quiet")
    _wait_for(pids_file)
    return run, {int(x) for x in pids_file.read_text().split()}


def test_workers_end_when_the_client_raises(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.format(pids=pids_file, sleep=0))
    p = cli("run", app, "--quiet")
    assert p.returncode == 1 and "failed on purpose" in p.stderr
    # The client's traceback from its own code: no frame of polybus's that called it.
    assert "polybus run: the client raised RuntimeError" in p.stderr
    assert 'client.py", line 13, in main' in p.stderr
    assert "polybus/" not in p.stderr.replace("polybus run:", "")
    workers = {int(x) for x in pids_file.read_text().split()}
    assert len(workers) == 2
    assert wait_gone(workers, timeout=10) == set()


def test_workers_end_on_sigint(tmp_path: Path, procs: Procs) -> None:
    run, workers = _running(tmp_path, procs, sleep=60)
    tree = descendants(run.pid)
    procs.watch(tree | workers)
    assert workers <= tree  # the workers are the run's own children
    run.send_signal(signal.SIGINT)
    finish(run, timeout=20)
    assert run.returncode != 0
    assert wait_gone(tree, timeout=10) == set()
    assert not any(alive(p) for p in workers)


NAP = """
    import time

    def nap(s):
        time.sleep(s)
        return s
"""

CLIENT_NAPPING = """
    from polybus import use

    pid = use("pid")
    nap = use("nap")

    def main(path, sleep):
        pids = {pid() for _ in range(4)}
        with open(path, "w") as f:
            f.write(" ".join(map(str, sorted(pids))))
        return nap(sleep)
"""


def test_ctrl_c_at_a_terminal_interrupts_the_run_not_its_replicas(tmp_path: Path) -> None:
    """A terminal's Ctrl-C sends SIGINT to the whole process group, replicas included,
    here while the client waits for a long call. The run must report "interrupted" (exit
    130) and stop its replicas itself; they used to stop first, and the run said "every
    replica of pid is gone" (exit 2)."""
    pids_file = tmp_path / "pids"
    app = write_app(tmp_path, server=SERVER + NAP, client=CLIENT_NAPPING,
                    toml=TOML.format(pids=pids_file, sleep=60).replace(
                        '"client.pid" = "server.pid"',
                        '"client.pid" = "server.pid"\n    "client.nap" = "server.nap"'))
    run = subprocess.Popen([*POLYBUS, "run", str(app), "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                           env=env_with(), start_new_session=True,  # its own group, as a shell's job
                           preexec_fn=interruptible)
    tree: set[int] = set()
    try:
        _wait_for(pids_file)
        workers = {int(x) for x in pids_file.read_text().split()}
        tree = descendants(run.pid) | workers
        os.killpg(run.pid, signal.SIGINT)  # what the terminal does
        _, err = finish(run, timeout=30)
        assert run.returncode == 130, err
        assert "interrupted" in err and "gone" not in err
        assert wait_gone(tree, timeout=10) == set()
    finally:
        kill_all(tree | descendants(run.pid))
        if run.poll() is None:
            run.kill()
            run.communicate()


def test_sigusr1_prints_the_stacks_and_the_run_goes_on(tmp_path: Path, procs: Procs) -> None:
    """`kill -USR1` on a run that seems stuck shows what each thread waits on."""
    run, _ = _running(tmp_path, procs, sleep=3)
    run.send_signal(signal.SIGUSR1)
    _, err = finish(run, timeout=30)
    assert "Current thread" in err and "in main" in err  # the client's frame, sleeping
    assert "failed on purpose" in err  # it went on to the end of its entrypoint
