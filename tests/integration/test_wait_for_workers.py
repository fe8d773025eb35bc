"""`--wait-for-workers`: a client started before its workers (a deployment's start
order) waits for them at the registry instead of failing at once; not given, or when
they never come, the run fails as before, saying how long it waited
(client/waitfor.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from integration.conftest import EXAMPLES, Procs, cli, finish, read_line, start_registry
from integration.test_by_hand import start_worker
from polybus.errors import UsageError

SORT = EXAMPLES / "sort"
ARGS = ("--set", "modules.client.args=[3000, 1]", "--set", "modules.server.replication=1")


def test_a_run_started_before_its_worker_waits_for_it(procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "wait-token-" + "w" * 20}
    addr, _ = start_registry(procs, env)
    run = procs.start("run", SORT / "app.toml", "--registry", addr, "--quiet",
                      "--wait-for-workers", "60s", *ARGS, env=env)
    assert run.stderr is not None
    line = read_line(run.stderr, "waiting up to").string
    assert "module 'server'" in line and "0 of 1 replica(s) registered" in line
    start_worker(procs, addr, "server-0", env=env)  # (only once the run waits)
    out, err = finish(run, 60)
    assert run.returncode == 0, err
    assert "'correct': True" in out


def test_a_worker_of_another_file_is_not_counted_while_it_waits(
        procs: Procs, tmp_path: Path) -> None:
    # Only a worker of another file registered under the module's key (this program's
    # server.py before an edit, or another program's): the run failed at once with
    # "restart them from this file", --wait-for-workers or not, where it had counted that
    # worker as the one it waited for and so never waited for the one started again.
    env = {"POLYBUS_TOKEN": "wait-token-" + "u" * 20}
    addr, _ = start_registry(procs, env)
    edited = tmp_path / "server.py"
    edited.write_text((SORT / "server.py").read_text() + "\n# edited\n")
    old = procs.start("worker", "--registry", addr, "--module", edited, "--name", "old-0",
                      env=env)
    assert old.stderr is not None
    read_line(old.stderr, "serving")  # registered
    run = procs.start("run", SORT / "app.toml", "--registry", addr, "--quiet",
                      "--wait-for-workers", "60s", *ARGS, env=env)
    assert run.stderr is not None
    line = read_line(run.stderr, "waiting up to").string
    assert "0 of 1 replica(s) registered" in line, line
    assert "1 more of another file than" in line and "not counted" in line, line
    start_worker(procs, addr, "server-0", env=env)  # (only once the run waits)
    read_line(run.stderr, "left out old-0")  # (said as ever, once the run goes on)
    out, err = finish(run, 60)
    assert run.returncode == 0, err
    assert "'correct': True" in out


def test_a_run_started_before_its_registry_waits_for_it(procs: Procs) -> None:
    # A deployment whose client comes up first may come up before the registry too (or
    # the registry is restarted under the wait): the run failed at once with "no
    # registry answers at ...", whatever --wait-for-workers said.
    env = {"POLYBUS_TOKEN": "wait-token-" + "r" * 20}
    with socket.socket() as s:  # (a free port, for the registry started later)
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    run = procs.start("run", SORT / "app.toml", "--registry", addr, "--quiet",
                      "--wait-for-workers", "60s", *ARGS, env=env)
    assert run.stderr is not None
    line = read_line(run.stderr, "does not answer").string
    assert f"the registry at {addr} does not answer" in line, line
    assert "waiting up to 60 s (--wait-for-workers)" in line, line
    procs.start("registry", "--listen", addr, env=env)  # (only once the run waits)
    start_worker(procs, addr, "server-0", env=env)
    out, err = finish(run, 60)
    assert run.returncode == 0, err
    assert "'correct': True" in out


def test_without_it_or_past_it_the_run_fails_saying_how_long_it_waited(
        procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "wait-token-" + "v" * 20}
    addr, _ = start_registry(procs, env)
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet", *ARGS, env=env)
    assert p.returncode != 0 and "NoReplicaError: no replica of module 'server'" in p.stderr
    assert "after" not in p.stderr.split("NoReplicaError", 1)[1].split("(", 1)[0]
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
            "--wait-for-workers", "0.3s", *ARGS, env=env)
    assert p.returncode != 0
    assert f"no replica of module 'server' is registered at {addr} after 0.3 s" in p.stderr
    assert "waiting up to 0.3 s (--wait-for-workers) for module 'server'" in p.stderr
    with socket.socket() as s:  # (no registry there at all, for as long as it waits)
        s.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{s.getsockname()[1]}"
    p = cli("run", SORT / "app.toml", "--registry", gone, "--quiet",
            "--wait-for-workers", "0.3s", *ARGS, env=env)
    assert p.returncode != 0
    assert f"no registry answers at {gone}" in p.stderr, p.stderr
    assert "(waited 0.3 s for it: --wait-for-workers)" in p.stderr, p.stderr


def test_it_is_refused_without_a_registry_before_anything_starts() -> None:
    import polybus

    with pytest.raises(UsageError, match="use it with --registry"):
        polybus.run(SORT / "app.toml", wait_for_workers="5s")
    with pytest.raises(UsageError, match="a duration above 0"):
        polybus.run(SORT / "app.toml", registry="127.0.0.1:9", wait_for_workers="soon")
    from polybus.http.frontdoor import serve  # (`polybus serve` takes it too)

    with pytest.raises(UsageError, match="use it with --registry"):
        serve(EXAMPLES / "rudy" / "app.toml", listen="127.0.0.1:0", wait_for_workers=5)
