"""Parts started by hand on two hosts, as a user starts them across machines: a registry
here, workers on another host (a network namespace joined by a veth pair: netns.py),
a client here. Needs root and `ip netns`; skipped with the reason otherwise.

- a worker given a wildcard `--listen` registers the address its host reaches the
  registry from, which clients can dial (it registered 0.0.0.0, which sent every client
  to its own host);
- a worker left on loopback says at start that other hosts cannot dial it, and how to
  listen; a client that finds it says why it cannot reach it;
- plain TCP beyond the host is said, by the registry and the worker;
- the registry says its members come, go silent past its ttl (the link cut) and come
  back (the link restored).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from polybus.client.promise import wait
from polybus.registry.client import RegistryClient

from . import netns
from .conftest import APP, Harness

_REASON = netns.reason()
pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(_REASON is not None, reason=f"hosts test: {_REASON}")]

TTL = 1.5


def _registry(harness: Harness, host_ip: str) -> None:
    proc = harness.start("registry", [sys.executable, "-m", "polybus", "registry",
                                      "--listen", f"{host_ip}:0", "--ttl", str(TTL)])
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("polybus registry listening on "), (line, harness.stderr("registry"))
    harness.registry = line.split()[-1]


def _worker(harness: Harness, host: netns.Host, name: str, *listen: str) -> None:
    more = [x for a in listen for x in ("--listen", a)]
    harness.start(name, host.exec(sys.executable, "-m", "polybus", "worker", "--registry",
                                  harness.registry, "--config", str(APP), "--as", "server",
                                  "--name", name, "--heartbeat", "0.5", *more))


def _until(what: str, check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(check) or not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_workers_by_hand_on_another_host(harness: Harness,
                                         caplog: pytest.LogCaptureFixture) -> None:
    with netns.other_host("pbhost") as host:
        try:
            _check_hosts(harness, host, caplog)
        finally:
            harness.close()  # (its processes end before their namespace goes)


def _check_hosts(harness: Harness, host: netns.Host,
                 caplog: pytest.LogCaptureFixture) -> None:
    _registry(harness, host.host_ip)
    _worker(harness, host, "wild", "tcp://0.0.0.0:0")
    _worker(harness, host, "loop")  # (the default: loopback)
    harness.wait_registered(["wild", "loop"])
    lookup = RegistryClient(harness.registry, harness.token, timeout=2)
    try:
        found = {r.name: r.address for r in lookup.resolve(module="server")}
    finally:
        lookup.close()
    # The wildcard registered as the namespace's own address, which this host dials.
    assert found["wild"].startswith(f"tcp://{host.ns_ip}:"), found
    assert found["loop"].startswith("tcp://127.0.0.1:"), found
    _until("the loopback worker's warning", lambda: "warning" in harness.stderr("loop"))
    loop_err = harness.stderr("loop")
    assert "this host's loopback" in loop_err, loop_err
    assert f"--listen tcp://{host.ns_ip}:0" in loop_err, loop_err
    wild_err = harness.stderr("wild")
    assert f"at tcp://{host.ns_ip}:" in wild_err and "(bound to 0.0.0.0)" in wild_err, wild_err
    assert "in plain TCP, beyond this host" in wild_err, wild_err

    # A client here: the wildcard worker answers; the loopback one is said unreachable,
    # with why.
    with caplog.at_level(logging.WARNING, logger="polybus.client"):
        session = harness.session(harness.app("modules.server.replication=2"))
        assert wait([session.call("square", (i,), {}) for i in range(20)]) == \
            [i * i for i in range(20)]
    assert "loop at tcp://127.0.0.1:" in caplog.text, caplog.text
    assert "an address only its own host can dial" in caplog.text, caplog.text

    reg_err = harness.stderr("registry")
    assert "polybus registry: warning: listening on" in reg_err, reg_err
    assert "in plain TCP, beyond this host" in reg_err, reg_err
    assert f"registry: wild registered (module 'server', tcp://{host.ns_ip}:" in reg_err

    # The link cut past the ttl: the registry drops both, and says so; back, they
    # register again, and it says that too.
    host.link("down")
    try:
        _until("the registry's drop", lambda: harness.stderr("registry").count(
            "no heartbeat for") >= 2)
    finally:
        host.link("up")
    _until("registered again", lambda: harness.stderr("registry").count(
        "registry: wild registered") >= 2)
    reg_err = harness.stderr("registry")
    assert f"registry: dropped wild (module 'server', tcp://{host.ns_ip}:" in reg_err, reg_err
    assert f"(ttl {TTL:g} s)" in reg_err, reg_err


WEB = "def hello(headers):\n    return 'hello ' + headers.get('host', '?')\n"
SERVED = ('[modules.web]\nsource = "web.py"\ndefine.hello = {}\n\n'
          '[serve]\nlisten = "127.0.0.1:0"\n\n[serve.routes]\n"GET /" = "web.hello"\n')


def test_serve_reached_from_another_host_says_it_is_open_to_it(
        harness: Harness, tmp_path: Path) -> None:
    """`polybus serve` here on the pair's address, a request from the other host: it is
    answered, and serve said at start that its front door, with no authentication of its
    own, is open beyond this host."""
    (tmp_path / "web.py").write_text(WEB)
    (tmp_path / "app.toml").write_text(SERVED)
    with netns.other_host("pbserve") as host:
        try:
            proc = harness.start("serve", [sys.executable, "-m", "polybus", "serve",
                                           str(tmp_path / "app.toml"), "--listen",
                                           f"{host.host_ip}:0", "--no-worker-output"])
            _until("serve listening", lambda: "listening on http://" in harness.stderr("serve")
                   or proc.poll() is not None)
            err = harness.stderr("serve")
            url = err.split("listening on ", 1)[1].split()[0]
            assert url.startswith(f"http://{host.host_ip}:"), err
            got = subprocess.run(
                host.exec(sys.executable, "-c", "import sys, urllib.request; sys.stdout.write("
                          f"urllib.request.urlopen({url + '/'!r}, timeout=10).read().decode())"),
                capture_output=True, text=True, timeout=60)
            assert got.stdout == f"hello {url.removeprefix('http://')}", (got, err)
            err = harness.stderr("serve")
            assert "polybus serve: warning: the front door at" in err, err
            assert "no authentication or TLS of its own" in err, err
        finally:
            harness.close()


SQUARES = ('[modules.server]\nsource = "server.py"\nreplication = "far,near"\n\n'
           '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
           'use.square = { callstyle = "async" }\n\n[bind]\n"client.square" = "server.square"\n')


def test_a_run_says_where_each_replica_it_found_at_the_registry_is(
        harness: Harness, tmp_path: Path) -> None:
    """Workers started by hand, one on another host and one here, a run here through
    their registry: `--json` gives each replica's address as the client dialled it, and
    the summary a `host` column, the other host's address for the one there, `here` for
    the other. Nothing said which host served what."""
    (tmp_path / "server.py").write_text("def square(x):\n    return x * x\n")
    (tmp_path / "client.py").write_text(
        "from polybus import use\n\nsquare = use('square')\n\n\n"
        "def main():\n    return sum(square(i) for i in range(20))\n")
    app = tmp_path / "app.toml"
    app.write_text(SQUARES)
    with netns.other_host("pbfix-") as host:
        try:
            _registry(harness, host.host_ip)
            harness.start("far", host.exec(
                sys.executable, "-m", "polybus", "worker", "--registry", harness.registry,
                "--config", str(app), "--as", "server", "--name", "far",
                "--listen", "tcp://0.0.0.0:0"))
            harness.start("near", [sys.executable, "-m", "polybus", "worker", "--registry",
                                   harness.registry, "--config", str(app), "--as", "server",
                                   "--name", "near"])
            harness.wait_registered(["far", "near"])
            run = subprocess.run([sys.executable, "-m", "polybus", "run", str(app),
                                  "--registry", harness.registry, "--json",
                                  str(tmp_path / "run.json")],
                                 env=harness.env, capture_output=True, text=True, timeout=120)
        finally:
            harness.close()  # (its processes end before their namespace goes)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(sum(i * i for i in range(20))), run
    rows = {r["name"]: r for r in json.loads((tmp_path / "run.json").read_text())["replicas"]}
    [far] = rows["far"]["addresses"]
    [near] = rows["near"]["addresses"]
    assert far.startswith(f"tcp://{host.ns_ip}:") and near.startswith("tcp://127.0.0.1:"), rows
    lines = run.stderr.splitlines()
    head = [c.strip() for c in next(x for x in lines if "replica" in x).split("┃")[1:4]]
    assert head == ["replica", "host", "via"], run.stderr
    cells = {c[0]: c[1] for x in lines if "│" in x
             for c in [[y.strip() for y in x.split("│")[1:3]]]}
    assert cells == {"far": host.ns_ip, "near": "here"}, run.stderr
