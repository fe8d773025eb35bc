"""Registry and workers started by hand, then `polybus run --registry`: the cluster
token. The file a registry makes (private, removed when it stops) or is given, the
token from --token-file, $POLYBUS_TOKEN or [cluster] token_file and in which order,
and a wrong token refused and said by the worker and the run."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from integration.conftest import Procs, cli, read_line, side_by_side, start_registry
from polybus.registry.client import RegistryClient

from .test_by_hand import SORT, start_workers


def test_registry_makes_a_private_token_file_and_workers_use_it(procs: Procs) -> None:
    addr, token_file = start_registry(procs)
    assert addr.startswith("127.0.0.1:")
    assert token_file is not None and token_file.exists()
    try:
        assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
        start_workers(procs, addr, ["server-0", "server-1"], "--token-file", token_file)
        p = cli("run", SORT / "app.toml", "--registry", addr, "--token-file", token_file,
                "--set", "modules.client.args=[5000, 2]", "--quiet", timeout=60)
        assert p.returncode == 0, p.stderr
        assert "'correct': True" in p.stdout
    finally:
        token_file.unlink(missing_ok=True)


def test_token_from_environment_and_wrong_token_refused(procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "right-token-" + "x" * 20}
    addr, _ = start_registry(procs, env)
    start_workers(procs, addr, ["server-0", "server-1"], env=env)
    intruder = procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                           env={"POLYBUS_TOKEN": "wrong-token"})  # (beside the runs)
    ok, bad = side_by_side(
        lambda: cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
                    "--set", "modules.client.args=[3000, 2]", env=env),
        lambda: cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
                    env={"POLYBUS_TOKEN": "wrong-token"}))
    assert ok.returncode == 0, ok.stderr
    assert "'correct': True" in ok.stdout
    assert bad.returncode != 0
    assert "token" in bad.stderr.lower()
    assert intruder.wait(timeout=30) != 0
    assert "token" in (intruder.stderr.read() if intruder.stderr else "").lower()


def test_run_with_registry_needs_a_token() -> None:
    p = cli("run", SORT / "app.toml", "--registry", "127.0.0.1:9", "--quiet")
    assert p.returncode == 2 and "POLYBUS_TOKEN" in p.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_registry_removes_the_token_file_it_made_when_stopped(procs: Procs, sig: int) -> None:
    _, token_file = start_registry(procs)
    assert token_file is not None and token_file.exists()
    try:
        reg = procs.started[-1]
        reg.send_signal(sig)
        assert reg.wait(timeout=30) == 128 + sig  # (130, 143, 129: as `run` exits)
        assert not token_file.exists()
    finally:
        token_file.unlink(missing_ok=True)


def test_registry_keeps_a_token_file_the_user_gave(procs: Procs, tmp_path: Path) -> None:
    given = tmp_path / "token"
    given.write_text("user-token-" + "y" * 20)
    start_registry(procs, None, "--token-file", str(given))
    reg = procs.started[-1]
    reg.send_signal(signal.SIGTERM)
    assert reg.wait(timeout=30) == 143
    assert given.read_text() == "user-token-" + "y" * 20


def test_worker_refused_by_the_registry_says_which_and_what_to_do(procs: Procs) -> None:
    addr, _ = start_registry(procs, {"POLYBUS_TOKEN": "right-token-" + "w" * 20})
    wrong = cli("worker", "--registry", addr, "--module", SORT / "server.py",
                env={"POLYBUS_TOKEN": "wrong-token"}, timeout=30)
    # (it was a RuntimeError traceback: the heartbeat thread joined before it started)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr, wrong.stderr
    assert f"registry at {addr} refused this connection: wrong cluster token" in wrong.stderr
    assert "--token-file" in wrong.stderr


def test_a_worker_says_when_a_restarted_registry_refuses_its_token_and_when_it_is_back(
        procs: Procs, tmp_path: Path) -> None:
    # A registry restarted on its address with another token (one that made its own
    # makes a new one) refused the worker at every retry, logging each refusal, while
    # the worker said nothing at all.
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("token-a-" + "a" * 20)
    b.write_text("token-b-" + "b" * 20)
    addr, _ = start_registry(procs, None, "--token-file", str(a))
    reg = procs.started[-1]
    w = procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                    "--name", "w0", "--token-file", a, "--heartbeat", "200ms")
    assert w.stderr is not None
    read_line(w.stderr, "serving")

    def stop(reg: subprocess.Popen[str]) -> None:
        reg.send_signal(signal.SIGTERM)
        assert reg.wait(timeout=30) == 143

    stop(reg)
    said = read_line(w.stderr, r"worker w0: .*").group(0)
    assert said == (f"worker w0: lost the registry at {addr}; serving on, and registering "
                    "again when a registry answers there")
    start_registry(procs, None, "--listen", addr, "--token-file", str(b))
    said = read_line(w.stderr, r"worker w0: .*").group(0)
    assert said.startswith(f"worker w0: the registry at {addr} refused this worker's "
                           "cluster token; was it restarted with another token? Restart "
                           "it with --token-file FILE or $POLYBUS_TOKEN"), said
    reg = procs.started[-1]
    assert reg.stderr is not None
    # Refused at every retry, said once (the registry: once a minute, quieter.py; the
    # worker's next word is about the next change)
    read_line(reg.stderr, "wrong cluster token")
    stop(reg)
    assert "lost the registry" in read_line(w.stderr, r"worker w0: .*").group(0)
    start_registry(procs, None, "--listen", addr, "--token-file", str(a))
    said = read_line(w.stderr, r"worker w0: .*").group(0)
    assert said == f"worker w0: registered again with the registry at {addr}"
    client = RegistryClient(addr, a.read_bytes())
    try:
        assert [r.name for r in client.resolve(module="server")] == ["w0"]
    finally:
        client.close()


def test_parts_started_with_config_read_its_token_file(procs: Procs, tmp_path: Path) -> None:
    # run read [cluster] token_file; worker --config said "no cluster token" and
    # registry --config made a token of its own.
    (tmp_path / "token").write_text("config-token-" + "t" * 20)
    app = tmp_path / "app.toml"
    app.write_text((SORT / "app.toml").read_text().replace('"server.py"', f'"{SORT}/server.py"')
                   .replace('"client.py"', f'"{SORT}/client.py"')
                   + '\n[cluster]\ntoken_file = "token"\n')
    addr, made = start_registry(procs, None, "--config", str(app))
    assert made is None
    ws = [procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                      "--name", f"server-{i}") for i in range(2)]
    for w in ws:
        assert w.stderr is not None
        read_line(w.stderr, "serving")
    p = cli("run", app, "--registry", addr, "--quiet", "--set", "modules.client.args=[3000, 2]")
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout


def test_every_part_takes_the_environments_token_before_the_configurations(
        procs: Procs, tmp_path: Path) -> None:
    # One rule for run, worker and registry: --token-file, else $POLYBUS_TOKEN, else
    # [cluster] token_file. run used to read the file first: with $POLYBUS_TOKEN set
    # for the cluster and a stale token in the file, every part but run agreed.
    (tmp_path / "token").write_text("stale-token-" + "s" * 20)
    app = tmp_path / "app.toml"
    app.write_text((SORT / "app.toml").read_text().replace('"server.py"', f'"{SORT}/server.py"')
                   .replace('"client.py"', f'"{SORT}/client.py"')
                   + '\n[cluster]\ntoken_file = "token"\n')
    env = {"POLYBUS_TOKEN": "env-token-" + "e" * 20}
    addr, made = start_registry(procs, env, "--config", str(app))
    assert made is None
    ws = [procs.start("worker", "--registry", addr, "--config", app, "--as", "server",
                      "--name", f"server-{i}", env=env) for i in range(2)]
    for w in ws:
        assert w.stderr is not None
        read_line(w.stderr, "serving")
    p, filed, stale = side_by_side(
        lambda: cli("run", app, "--registry", addr, "--quiet",
                    "--set", "modules.client.args=[3000, 2]", env=env),
        lambda: cli("run", app, "--registry", addr, "--quiet",
                    "--token-file", tmp_path / "token", env=env),
        lambda: cli("run", app, "--registry", addr, "--quiet",
                    env={"POLYBUS_TOKEN": "a-stale-one-" + "x" * 20}))
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    # and --token-file comes before both: the stale file named on the command line
    p = filed
    assert p.returncode != 0 and "token" in p.stderr.lower(), p.stderr
    # A refused token says where it came from (a stale $POLYBUS_TOKEN beats the file)
    assert f"this run's token came from --token-file {tmp_path / 'token'}" in p.stderr
    p = stale
    assert p.returncode != 0 and "wrong cluster token" in p.stderr, p.stderr
    assert ("this run's token came from $POLYBUS_TOKEN, which comes before [cluster] "
            f"token_file {tmp_path / 'token'}") in p.stderr, p.stderr
