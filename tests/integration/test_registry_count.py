"""More workers registered than a module's ``replication``: `run --registry` uses
``replication`` of them (the configured names first where a load ratio's shares follow
them; else, for a count, those the client's turn gives), says which, and a load ratio's
shares line up with them. It used every one registered, so a ``loadratio`` (as many
shares as the replication) failed with an IndexError inside polybus."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from integration.conftest import EXAMPLES, Procs, cli, read_line, start_registry
from integration.test_serve_revival import _get, _listening

SORT = EXAMPLES / "sort"


def _worker(procs: Procs, addr: str, name: str, env: dict[str, str],
            module: Path = SORT / "server.py") -> None:
    w = procs.start("worker", "--registry", addr, "--module", module, "--name", name, env=env)
    assert w.stderr is not None
    read_line(w.stderr, "serving")  # printed once registered


def _run(addr: str, env: dict[str, str], out: Path, *sets: str) -> tuple[dict[str, int], list[str]]:
    """A correct sort over the registry with ``sets``: calls per replica, warning lines."""
    p = cli("run", SORT / "app.toml", "--registry", addr, "--quiet", "--json", out,
            *[a for s in sets for a in ("--set", s)], env=env, timeout=90)
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert data["result"]["correct"] is True, data["result"]
    return ({r["name"]: r["calls"] for r in data["replicas"]},
            [ln for ln in p.stderr.splitlines() if "warning" in ln])


def test_more_registered_than_the_replication_uses_the_replication(
        procs: Procs, tmp_path: Path) -> None:
    env = {"POLYBUS_TOKEN": "regcount-token-" + "r" * 20}
    addr, _ = start_registry(procs, env)
    for name in ("server-2", "server-0", "server-1"):  # (registered out of order)
        _worker(procs, addr, name, env)
    out = tmp_path / "run.json"

    # replication = 2 (app.toml) and a load ratio of its 2 shares: the IndexError
    calls, warnings = _run(addr, env, out, 'modules.client.use.quicksort.loadratio="1:3"',
                           "modules.client.args=[4000, 4]")
    assert calls == {"server-0": 1, "server-1": 3}, calls  # (the shares by name)
    assert warnings == [
        "polybus: warning: module 'server': 3 replicas registered, replication = 2; using "
        "server-0, server-1, not server-2 (raise replication to use them all)"], warnings

    # replication = 1: one replica, not both; with no load ratio, the one this second
    # client's turn at the shared registry gives (test_registry_turns.py)
    calls, warnings = _run(addr, env, out, "modules.server.replication=1",
                           "modules.client.args=[3000, 3]")
    assert calls == {"server-1": 3}, calls
    assert len(warnings) == 1 and "using server-1, not server-0, server-2" in warnings[0]

    # as many as registered: all used, nothing said
    calls, warnings = _run(addr, env, out, "modules.server.replication=3",
                           'modules.client.use.quicksort.loadratio="1:1:1"',
                           "modules.client.args=[3000, 3]")
    assert calls == {"server-0": 1, "server-1": 1, "server-2": 1}, calls
    assert warnings == [], warnings

    # one of another file (an edited copy): left out by name; the count said once for
    # the module, with what was registered (it said "found 3 registered" of 4, naming
    # one interface, after a warning that said "running with 3 of the 4 registered")
    edited = tmp_path / "server.py"
    edited.write_text((SORT / "server.py").read_text() + "\n# edited\n")
    _worker(procs, addr, "server-3", env, module=edited)
    calls, warnings = _run(addr, env, out, "modules.server.replication=4",
                           "modules.client.args=[3000, 3]")
    assert set(calls) == {"server-0", "server-1", "server-2"}, calls
    assert len(warnings) == 2, warnings
    assert "left out server-3" in warnings[0] and "running with" not in warnings[0]
    assert warnings[1] == (
        f"polybus: warning: module 'server' ('quicksort', 'insertion_sort'): configured 4 "
        f"replica(s), found 4 registered at {addr}, 1 of them left out (another file); "
        f"running with 3")


SERVED = """\
[modules.h]
source = "h.py"
replication = 2

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /who" = { to = "h.who", loadratio = "1:3" }
"""


def test_serve_with_more_registered_than_the_replication(procs: Procs, tmp_path: Path) -> None:
    """Every request of a route with a load ratio got no answer (its connection closed;
    the log said `Unhandled exception in client_connected_cb ... IndexError`)."""
    env = {"POLYBUS_TOKEN": "regcount-serve-" + "s" * 20}
    (tmp_path / "h.py").write_text("import os\n\n\ndef who():\n    return {'pid': os.getpid()}\n")
    app = tmp_path / "app.toml"
    app.write_text(SERVED)
    addr, _ = start_registry(procs, env)
    pids = {}
    for i in (2, 0, 1):
        w = procs.start("worker", "--registry", addr, "--config", app, "--as", "h",
                        "--name", f"h-{i}", env=env)
        assert w.stderr is not None
        read_line(w.stderr, r"serving .*who@http")
        pids[w.pid] = f"h-{i}"
    host, port, _ = _listening(procs, app, "--registry", addr, env=env)
    answered: Counter[str] = Counter()
    for _ in range(8):
        status, body = _get(host, port, "/who")
        assert status == 200, body
        answered[pids[json.loads(body)["pid"]]] += 1
    assert answered == {"h-0": 2, "h-1": 6}, answered
