"""Registry and workers started by hand, then `polybus run --registry` (the cluster
token: test_by_hand_tokens.py; stopped by a signal: test_by_hand_stop.py)."""

from __future__ import annotations

import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from integration.conftest import (
    EXAMPLES,
    POLYBUS,
    Procs,
    cli,
    env_with,
    interruptible,
    read_line,
    side_by_side,
    start_registry,
)
from polybus.registry.client import RegistryClient

SORT = EXAMPLES / "sort"


def start_worker(procs: Procs, addr: str, name: str, *args: str | Path,
                 env: dict[str, str] | None = None) -> None:
    start_workers(procs, addr, [name], *args, env=env)


def start_workers(procs: Procs, addr: str, names: list[str], *args: str | Path,
                  env: dict[str, str] | None = None) -> None:
    """Workers of the sort example's server, one per name, started together, then each
    waited for until registered."""
    started = [procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                           "--name", name, *args, env=env) for name in names]
    for w in started:
        assert w.stderr is not None
        read_line(w.stderr, "serving")  # printed once registered


def test_fewer_replicas_than_configured_warns_once_and_runs(procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "fewer-token-" + "z" * 20}
    addr, _ = start_registry(procs, env)
    start_worker(procs, addr, "server-0", env=env)
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
            "--set", "modules.client.args=[3000, 2]", env=env)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    warnings = [ln for ln in p.stderr.splitlines() if "warning" in ln]
    # two bindings reach module 'server': one warning, naming what was asked and found
    assert len(warnings) == 1, p.stderr
    assert "module 'server'" in warnings[0] and "'quicksort'" in warnings[0]
    assert "configured 2" in warnings[0] and "found 1" in warnings[0]
    assert f"at {addr}" in warnings[0] or addr in warnings[0]
    start_worker(procs, addr, "server-1", env=env)

    def warnings_of(*sets: str) -> list[str]:
        """A correct run of the sort with ``sets``: its warning lines."""
        p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
                "--set", "modules.client.args=[3000, 2]",
                *[a for s in sets for a in ("--set", s)], env=env)
        assert p.returncode == 0 and "'correct': True" in p.stdout, p.stderr
        return [ln for ln in p.stderr.splitlines() if "warning" in ln]

    plain, pooled, shm = side_by_side(
        warnings_of, lambda: warnings_of("modules.server.define.quicksort.pool=4"),
        lambda: warnings_of('modules.server.transport="shm"'))
    assert plain == []
    # A setting the replicas apply themselves is theirs (workers of --module: pool 1),
    # not this run's: said, and the run goes on with the workers as they are.
    [warned] = pooled
    assert ("warning: --set: modules.server.define.quicksort.pool: the replicas started by "
            "hand apply their own define.quicksort.pool: server-0, server-1 have 1 where "
            "this run's configuration gives 4") in warned, warned
    # Workers of --module listen on TCP alone: a run configured for shm says it uses that.
    [warned] = shm
    assert "configured for shm" in warned and "server-0, server-1 on this host" in warned


@pytest.mark.slow
def test_a_registered_replica_that_cannot_be_reached_is_left_out_by_name(procs: Procs) -> None:
    """A replica the registry still lists but that does not answer (here stopped, and the
    registry's ttl long) failed the whole run with `handshake with tcp://127.0.0.1:PORT
    failed: timed out`, naming no replica; it is left out as one not registered is.
    (Each run waits out the handshake's timeout: the run with one of two stopped and
    the run with both stopped, at a registry of their own, go side by side.)"""
    env = {"POLYBUS_TOKEN": "unreachable-token-" + "u" * 20}
    addr, _ = start_registry(procs, env, "--ttl", "60")
    addr2, _ = start_registry(procs, env, "--ttl", "60")
    # (the four started together, then each waited for)
    workers = [procs.start("worker", "--registry", a, "--module", SORT / "server.py",
                           "--name", name, env=env)
               for a in (addr, addr2) for name in ("server-0", "server-1")]
    for w in workers:
        assert w.stderr is not None
        read_line(w.stderr, "serving")  # printed once registered
    stopped = workers[1:]  # server-1 at the first registry, both at the second
    try:
        for w in stopped:
            w.send_signal(signal.SIGSTOP)
        with ThreadPoolExecutor(2) as both:
            some = both.submit(cli, "run", SORT / "app.toml", "--registry", addr, "--quiet",
                               "--set", "modules.client.args=[3000, 2]", env=env, timeout=60)
            none = both.submit(cli, "run", SORT / "app.toml", "--registry", addr2, "--quiet",
                               env=env, timeout=60)
        p = some.result()
        assert p.returncode == 0, p.stderr
        assert "'correct': True" in p.stdout
        warnings = [ln for ln in p.stderr.splitlines() if "warning" in ln]
        assert len(warnings) == 1, p.stderr  # (this one, not also "found 1" of 2)
        assert "module 'server': 1 of 2 replica(s)" in warnings[0]
        assert "server-1 at tcp://127.0.0.1:" in warnings[0]
        assert "cannot be reached" in warnings[0] and "running with 1" in warnings[0]
        assert none.result().returncode == 2
        assert (f"no replica of module 'server' registered at {addr2} can be reached: "
                "server-0 at tcp://127.0.0.1:") in none.result().stderr
        assert "; server-1 at tcp://127.0.0.1:" in none.result().stderr
    finally:
        for w in stopped:
            w.send_signal(signal.SIGCONT)


def test_worker_and_run_without_a_registry_say_so() -> None:
    env = {"POLYBUS_TOKEN": "any-token-" + "v" * 20}
    *ps, bad = side_by_side(
        lambda: cli("worker", "--registry", "127.0.0.1:9", "--module", SORT / "server.py",
                    env=env, timeout=30),
        lambda: cli("run", SORT / "app.toml", "--registry", "127.0.0.1:9", env=env,
                    timeout=30),
        lambda: cli("run", SORT / "app.toml", "--registry", "localhost", env=env))
    for p in ps:
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "no registry answers at 127.0.0.1:9" in p.stderr
        assert "polybus registry" in p.stderr
    assert bad.returncode == 2
    assert ("--registry 'localhost': bad registry address (expected HOST:PORT with 1 <= "
            "PORT <= 65535") in bad.stderr  # (as [cluster] registry says it)


def test_workers_of_the_wrong_module_are_named_before_any_call(
        procs: Procs, tmp_path: Path) -> None:
    # None at all, one under another key (--module names it by its file), one of another
    # file under the same key: each said at start, with what to do.
    env = {"POLYBUS_TOKEN": "shared-token-" + "u" * 20}
    addr, _ = start_registry(procs, env)
    none = cli("run", SORT / "app.toml", "--registry", addr, "--quiet", env=env)
    assert none.returncode == 2
    assert (f"no replica of module 'server' is registered at {addr} (nothing is "
            f"registered there). Start one: `polybus worker --registry {addr} --config "
            f"{SORT / 'app.toml'} --as server` with this run's token (--token-file FILE, "
            f"or $POLYBUS_TOKEN)" in none.stderr), none.stderr
    stem = tmp_path / "srv.py"  # module 'srv', not 'server'
    stem.write_text("def quicksort(xs):\n    return xs\n")
    w = procs.start("worker", "--registry", addr, "--module", stem, env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    named = cli("run", SORT / "app.toml", "--registry", addr, "--quiet", env=env)
    assert named.returncode == 2
    assert ("(modules registered there: srv; a worker started with --module FILE serves "
            "the module named as FILE's stem)" in named.stderr), named.stderr
    other = tmp_path / "server.py"  # another program's server.py: also module 'server'
    other.write_text("def quicksort(xs):\n    return xs[::-1]\n")  # (same interface)
    start_worker(procs, addr, "server-0", env=env)
    w = procs.start("worker", "--registry", addr, "--module", other, "--name", "stray",
                    env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    # One of the two parts went to the stray, whose answer was silently wrong: it is
    # left out now, by its file, and said.
    p = cli("run", SORT / "app.toml", "--registry", addr, "--set",
            "modules.client.args=[3000, 2]", env=env)
    assert p.returncode == 0 and "'correct': True" in p.stdout, p.stderr
    assert ("module 'server': left out stray, registered at " in p.stderr
            and f"running another file than {SORT / 'server.py'}" in p.stderr), p.stderr
    # Only workers of another file: none is used, and the error says why.
    addr2, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr2, "--module", other, "--name", "stray2",
                    env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")
    p = cli("run", SORT / "app.toml", "--registry", addr2, "--quiet", env=env)
    assert p.returncode == 2, p.stderr
    assert (f"every replica of module 'server' registered at {addr2} (stray2) runs another "
            f"file than {SORT / 'server.py'}" in p.stderr), p.stderr


def test_parts_started_with_config_find_the_registry_it_names(
        procs: Procs, tmp_path: Path) -> None:
    """[cluster] registry is where the run looks for the registry; `polybus registry
    --config` now listens there and `polybus worker --config` registers there, with no
    --listen or --registry (the worker said --registry was required; the registry took
    a free port the configuration did not name)."""
    import socket

    with socket.socket() as s:  # a free loopback port for the configuration to name
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "token").write_text("config-token-" + "r" * 20)
    app = tmp_path / "app.toml"
    app.write_text((SORT / "app.toml").read_text().replace('"server.py"', f'"{SORT}/server.py"')
                   .replace('"client.py"', f'"{SORT}/client.py"')
                   + f'\n[cluster]\nregistry = "127.0.0.1:{port}"\ntoken_file = "token"\n')
    reg = procs.start("registry", "--config", str(app))
    assert reg.stdout is not None
    assert read_line(reg.stdout, r"listening on (\S+)").group(1) == f"127.0.0.1:{port}"
    ws = [procs.start("worker", "--config", app, "--as", "server", "--name", f"server-{i}")
          for i in range(2)]
    for w in ws:
        assert w.stderr is not None
        read_line(w.stderr, "serving")
    p, ipc, named = side_by_side(
        lambda: cli("run", app, "--quiet", "--set", "modules.client.args=[3000, 2]"),
        lambda: cli("run", app, "--quiet", "--set", "modules.client.args=[3000, 2]",
                    "--set", 'modules.server.transport="ipc"'),
        lambda: cli("run", app, "--quiet", "--set", "modules.client.args=[3000, 1]",
                    "--set", 'modules.server.replication="server-1"'))
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    # These workers were started with --config, of transport tcp: a run given ipc by
    # --set is told so (it was told they were started "with --module or --listen")
    p = ipc
    assert p.returncode == 0 and "'correct': True" in p.stdout, p.stderr
    warned = "\n".join(ln for ln in p.stderr.splitlines() if "warning" in ln)
    assert ("server-0, server-1 on this host offer only tcp: this run's ipc is from --set, "
            "which reaches no worker started by hand") in warned, warned
    # names in the replication pick the workers of those names: not said to reach none
    # (it was: "--set changes a setting the replicas apply themselves ... it does not
    # reach them", of the --set that chose server-1)
    p = named
    assert p.returncode == 0 and "'correct': True" in p.stdout, p.stderr
    warned = "\n".join(ln for ln in p.stderr.splitlines() if "warning" in ln)
    assert ('replication = "server-1"; using server-1, not server-0 (name them in '
            "replication to use them all)") in warned, warned


def test_a_worker_without_a_registry_to_go_to_says_how_to_name_one() -> None:
    p = cli("worker", "--module", SORT / "server.py",
            env={"POLYBUS_TOKEN": "any-token-" + "w" * 20}, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "give --registry HOST:PORT (or --config a configuration whose [cluster] " \
           "registry names it)" in p.stderr


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])  # (SIGHUP: terminal closed)
def test_a_worker_with_config_listens_on_its_modules_transport(procs: Procs, stop: int) -> None:
    """`polybus worker --config --as` of a module with ``transport = "shm"`` serves on shm
    beside TCP (it listened on TCP alone, and the run went by TCP whatever the
    configuration said). TCP stays its main address, for clients on other hosts; a run
    here uses shm; the socket directory goes when the worker stops."""
    token = "by-hand-shm-token-" + "s" * 20
    env = {"POLYBUS_TOKEN": token}
    shm = 'modules.server.transport="shm"'
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--config", SORT / "app.toml", "--as",
                    "server", "--name", "server-0", "--set", shm, env=env)
    assert w.stderr is not None
    banner = read_line(w.stderr, "serving .*").group(0)  # every address it listens on
    assert " at tcp://127.0.0.1:" in banner and "(and shm://" in banner, banner
    client = RegistryClient(addr, token.encode())
    try:
        [r] = client.resolve(module="server")
    finally:
        client.close()
    assert r.address.startswith("tcp://127.0.0.1:")
    [path] = [a.removeprefix("shm://") for a in r.addresses if a.startswith("shm://")]
    assert Path(path).exists()
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet", "--set", shm,
            "--set", "modules.client.args=[3000, 1]", env=env)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    assert "only tcp" not in p.stderr  # (it offers shm)
    w.send_signal(stop)
    assert w.wait(timeout=30) == 128 + stop
    assert not Path(path).parent.exists()


def test_a_workers_address_given_for_the_registrys_is_named_as_a_worker(procs: Procs) -> None:
    """`--registry` pointed at a worker (its port is printed too): the error says that
    address is a worker, not a registry (it said "a worker does not take Resolve")."""
    env = {"POLYBUS_TOKEN": "which-port-token-" + "p" * 20}
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--module", SORT / "server.py",
                    "--name", "server-0", env=env)
    assert w.stderr is not None
    worker_addr = read_line(w.stderr, r"serving .* at tcp://(127\.0\.0\.1:\d+)").group(1)
    p = cli("run", SORT / "app.toml", "--registry", worker_addr, "--quiet", env=env)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert (f"{worker_addr} (the registry) closed the connection: that is polybus worker "
            f"server-0, not a registry (it does not take Resolve; `polybus registry` prints "
            f"the address to give)") in p.stderr, p.stderr


def test_a_worker_asked_to_serve_the_client_module_says_so(procs: Procs) -> None:
    env = {"POLYBUS_TOKEN": "client-as-server-" + "c" * 20}
    addr, _ = start_registry(procs, env)
    w = procs.start("worker", "--registry", addr, "--config", SORT / "app.toml", "--as",
                    "client", "--name", "c-0", env=env)
    assert w.stderr is not None
    said = read_line(w.stderr, "warning|serving").group(0)
    assert said == "warning", "no warning before it served"
    assert read_line(w.stderr, "serving")  # (served anyway)


def test_a_registry_started_under_nohup_outlives_its_terminal(procs: Procs) -> None:
    """SIGHUP inherited ignored (``nohup polybus registry &``) stays ignored: closing the
    terminal must not stop what nohup started; SIGTERM still does."""
    def hup_ignored() -> None:
        interruptible()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    reg = subprocess.Popen([*POLYBUS, "registry", "--listen", "127.0.0.1:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, text=True, env=env_with(None),
                           preexec_fn=hup_ignored)
    procs.started.append(reg)  # (ended with the test, whatever happens)
    assert reg.stdout is not None
    made = Path(read_line(reg.stdout, r"token written to (\S+)").group(1))
    reg.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        reg.wait(timeout=0.5)  # (a SIGHUP it took ends it at once)
    assert made.exists()
    reg.send_signal(signal.SIGTERM)
    assert reg.wait(timeout=30) == 143
    assert not made.exists()


def test_a_hosts_run_names_the_replicas_it_found_in_place_of_those_named(procs: Procs) -> None:
    """Under the hosts engine a replication of names (machines) that are not registered,
    while another worker serves the module, ran on that worker with at most a count's
    warning (none at all when the counts matched). Now it says which are missing and
    who serves instead."""
    env = {"POLYBUS_TOKEN": "hosts-names-token-" + "n" * 20}
    addr, _ = start_registry(procs, env)
    start_workers(procs, addr, ["zed", "yak"], env=env)
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet",
            "--set", 'cluster.engine="hosts"', "--set", 'modules.server.replication="alpha,yak"',
            "--set", "modules.client.args=[3000, 2]", env=env)
    assert p.returncode == 0, p.stderr
    assert "'correct': True" in p.stdout
    assert ("configured 2 replica(s), found 2 registered at " in p.stderr
            and "alpha named in its replication not registered, zed serving instead"
            in p.stderr), p.stderr
