"""``replication = 0``: the same module files run with the client doing the work itself
(no worker process), and the program sees what it sees with replicas: the same values,
the same promises, the same errors at the same points. The runs with replicas are
`polybus.run`'s, which stops its workers however the run ends."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import polybus
from integration.conftest import EXAMPLES, ROOT
from polybus.cli.main import main as cli
from polybus.cli.sweep_table import DASH
from polybus.config import load
from polybus.engines.local import LocalEngine
from polybus.errors import ConfigWarning, RemoteException
from polybus.testing.apps import write_app
from polybus.testing.proctree import children

R0 = {"modules.server.replication": 0}
CALC = ROOT / "tests" / "integration" / "apps" / "calc" / "app.toml"
CALC_IFACES = ("square", "scale", "describe", "echo", "pair")

SERVER = """\
import os

class InputError(Exception):
    pass

def boom(x):
    if x < 0:
        raise InputError(f"negative: {x}")
    return x * 2

def where():
    return os.getpid()

def grow(xs):
    xs.append(0)
    return len(xs)

def name():
    return __name__
"""
CLIENT = """\
import os

import polybus
from polybus import use, wait

boom = use("boom")
where = use("where")
grow = use("grow")
name = use("name")

def main(kind="values"):
    if kind == "values":
        p = boom(3)
        done = [wait(q) for q in polybus.as_completed([boom(i) for i in range(4)])]
        return {"p": p + 1, "is_promise": isinstance(p, polybus.Promise),
                "sorted": sorted(done), "waited": wait([boom(5), {"k": boom(6)}]),
                "passed": wait(boom(boom(1))), "pid_same": wait(where()) == os.getpid(),
                "name": wait(name())}
    if kind == "raise_at_call":
        boom(-1)
        return "not reached"
    if kind == "raise_at_use":
        p = boom(-2)
        q = boom(4)
        return int(q) + int(p)
    if kind == "mutate":
        xs = [1, 2]
        n = wait(grow(xs))
        return {"n": n, "xs": xs}
    raise ValueError(kind)
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 0

[modules.client]
source = "client.py"
entrypoint = "main"
use.boom = { callstyle = "async" }

[bind]
"client.boom" = "server.boom"
"client.where" = "server.where"
"client.grow" = "server.grow"
"client.name" = "server.name"
"""
STYLES = ("sync", "async", "async-demand(2)")


@pytest.fixture
def app(tmp_path: Path) -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)


def _styled(style: str, replicas: int, **more: Any) -> dict[str, Any]:
    return {"modules.server.replication": replicas,
            **{f"modules.client.use.{n}.callstyle": style
               for n in ("boom", "where", "grow", "name")}, **more}


@pytest.mark.parametrize(("example", "args"), [
    ("sort", [6000, 2, "quicksort"]), ("sort", [1500, 2, "insertion"]), ("matmul", [24])])
def test_the_examples_give_the_same_result_with_zero_replicas_as_with_two(
        example: str, args: list[Any]) -> None:
    path = EXAMPLES / example / "app.toml"
    over = {"modules.client.args": args}
    alone = polybus.run(path, {**over, **R0})
    two = polybus.run(path, {**over, "modules.server.replication": 2})
    assert alone.result == two.result and alone.result["correct"] is True
    assert alone.calls == two.calls and alone.replicas == [] and len(two.replicas) == 2
    assert alone.in_client == {"server": alone.calls} and two.in_client == {}
    assert alone.bytes_sent == alone.bytes_received == 0


def test_the_stateful_matmul_runs_with_its_cache_ignored() -> None:
    path = EXAMPLES / "matmul" / "stateful.toml"
    with pytest.warns(ConfigWarning, match=r"cache(_bytes)? is ignored"):
        alone = polybus.run(path, {"modules.client.args": [16], **R0})
    assert alone.result == polybus.run(path, {"modules.client.args": [16]}).result


@pytest.mark.parametrize("style", STYLES)
def test_every_call_style_gives_the_answer_replicas_give(app: Path, style: str) -> None:
    alone = polybus.run(app, _styled(style, 0))
    assert alone.result == {"p": 7, "is_promise": style != "sync", "sorted": [0, 2, 4, 6],
                            "waited": [10, {"k": 12}], "passed": 4, "pid_same": True,
                            "name": "polybus_user_server"}  # (its own globals: a worker's)
    two = polybus.run(app, _styled(style, 2))
    assert two.result == {**alone.result, "pid_same": False}
    assert alone.calls == two.calls == 11 and alone.in_client == {"server": 11}


@pytest.mark.parametrize("style", ["sync", "async"])
def test_calc_gives_the_same_answers_in_the_client(style: str) -> None:
    sets: dict[str, Any] = {f"modules.client.use.{n}.callstyle": style for n in CALC_IFACES}
    alone = polybus.run(CALC, {**sets, **R0})
    one = polybus.run(CALC, {**sets, "modules.server.replication": 1})
    assert alone.result == one.result and alone.calls == one.calls


def _error(app: Path, kind: str, replicas: int, style: str = "async") -> RemoteException:
    with pytest.raises(RemoteException) as e:
        polybus.run(app, _styled(style, replicas, **{"modules.client.args": [kind]}))
    return e.value


@pytest.mark.parametrize(("kind", "style", "line"), [
    ("raise_at_call", "sync", "boom(-1)"),            # a sync call raises at the call
    ("raise_at_use", "async", "return int(q) + int(p)"),  # an async one where it is used
    ("raise_at_use", "async-demand(2)", "return int(q) + int(p)")])
def test_a_function_that_raises_fails_as_on_a_replica(app: Path, kind: str, style: str,
                                                      line: str) -> None:
    alone, one = _error(app, kind, 0, style), _error(app, kind, 1, style)
    assert alone.remote_type == one.remote_type == "server.InputError"
    assert alone.remote_message == one.remote_message
    assert alone.remote_traceback == one.remote_traceback
    assert 'server.py", line 8, in boom' in alone.remote_traceback
    assert alone.interface == one.interface == "boom" and alone.call == one.call
    assert alone.replica == "" and one.replica == "server-0"
    assert alone.call_site == one.call_site and alone.call_site is not None
    assert str(alone) == str(one).replace(" on server-0)", ")", 1)
    assert line in str(alone)


def test_a_failure_never_looked_at_is_said(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    app = write_app(tmp_path, server=SERVER, client=(
        "from polybus import use\n\nboom = use('boom')\n\n\ndef main():\n"
        "    boom(-3)\n    return 'done'\n"), toml=TOML.split('"client.where"')[0])
    with caplog.at_level("WARNING", logger="polybus.client.unseen"):
        r = polybus.run(app, R0)
    assert r.result == "done"
    said = [rec.getMessage() for rec in caplog.records]
    assert any("a call to 'boom' failed and its error was never looked at" in m
               and "negative: -3" in m for m in said), said


def test_arguments_are_passed_as_they_are(app: Path) -> None:
    """Documented: no copy, so a function that changes its argument changes the
    caller's object in the client (unlike with replicas, which work on a copy)."""
    alone = polybus.run(app, _styled("sync", 0, **{"modules.client.args": ["mutate"]}))
    one = polybus.run(app, _styled("sync", 1, **{"modules.client.args": ["mutate"]}))
    assert alone.result == {"n": 3, "xs": [1, 2, 0]} and one.result == {"n": 3, "xs": [1, 2]}


def test_no_worker_is_started(app: Path) -> None:
    # (children this test process had already, an earlier test's still ending, aside)
    before = children(os.getpid())
    engine = LocalEngine(load(app))
    try:
        engine.start()
        assert engine.procs == [] and children(os.getpid()) - before == set()
    finally:
        engine.stop()


def test_the_module_leaves_the_process_with_its_run(app: Path) -> None:
    """As a replica's module goes with its process, the one imported into the client
    goes from sys.modules when the run ends (the next run imports the file afresh)."""
    import sys

    from polybus.usernames import import_name

    name = import_name("server")
    sys.modules.pop(name, None)
    polybus.run(app, _styled("sync", 0, **{"modules.client.args": ["mutate"]}))
    assert name not in sys.modules


def test_the_summary_and_json_say_where_the_calls_went(
        app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert cli(["run", str(app), "--json", str(out)]) == 0
    err = capsys.readouterr().err
    assert "server: 0 replicas, 11 calls in the client\n" in err
    assert "replica" not in err.split("elapsed")[0]  # (no table of replicas: there are none)
    assert "11 calls, sent 0 B, received 0 B" in err
    doc = json.loads(out.read_text())
    assert doc["replicas"] == [] and doc["in_client"] == {"server": 11} and doc["calls"] == 11
    assert doc["interfaces"]["client.boom"]["calls"] == 9
    r = polybus.run(app, R0)
    assert "server: 0 replicas, 11 calls in the client" in r.summary()


@pytest.mark.slow
def test_a_sweep_against_the_client_alone(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`--vary modules.server.replication=0,1,2 --baseline replication=0`: every cell has
    a speedup against the client alone; efficiency is a dash at 0 (no servers) and speedup
    per replica elsewhere."""
    js = tmp_path / "s.json"
    assert cli(["sweep", str(EXAMPLES / "matmul" / "app.toml"), "--vary",
                "modules.server.replication=0,1,2", "--baseline", "replication=0",
                "--set", "modules.client.args=[16]", "--repeat", "1", "--quiet",
                "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "speedup vs modules.server.replication=0; efficiency: that speedup per replica" \
        in out
    # (the table's rows: replication, elapsed s, speedup, efficiency, sent, received)
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]
    assert [r[0] for r in rows] == ["0", "1", "2"]
    assert rows[0][2:4] == ["1", DASH]  # speedup 1 against itself, no efficiency
    assert all(DASH not in r[2:4] for r in rows[1:])
    cells = json.loads(js.read_text())["cells"]
    assert [c["config"]["modules.server.replication"] for c in cells] == [0, 1, 2]
    assert cells[0]["speedup"] == 1.0 and cells[0]["efficiency"] is None
    for c in cells[1:]:
        n = c["config"]["modules.server.replication"]
        assert c["speedup"] > 0 and c["efficiency"] == pytest.approx(c["speedup"] / n)
        assert c["speedup"] == pytest.approx(cells[0]["median"] / c["median"])


MIXED_TOML = """\
[modules.server]
source = "server.py"
replication = 0

[modules.other]
source = "other.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.boom = { callstyle = "async" }
use.twice = { callstyle = "async" }

[bind]
"client.boom" = "server.boom"
"client.twice" = "other.twice"
"""
MIXED_CLIENT = """\
from polybus import use, wait

boom = use("boom")
twice = use("twice")

def main():
    q = twice(boom(-1))
    try:
        wait(q)
    except Exception as e:
        return "at use", e.remote_message, e.origin
    return "no error"
"""


REVERSED_CLIENT = """\
from polybus import use, wait

boom = use("boom")
nope = use("nope")

def main():
    q = boom(nope(1))
    try:
        wait(q)
    except Exception as e:
        return "at use", e.remote_message, e.origin
    return "no error"
"""


def test_a_failed_replica_promise_fails_a_call_made_in_the_client_where_it_is_used(
        tmp_path: Path) -> None:
    """The other way round: a replica's failed promise given to an async call made in
    the client raised at that call, as the client took its value."""
    app = write_app(tmp_path, server=SERVER, client=REVERSED_CLIENT, toml=MIXED_TOML.replace(
        '"client.twice" = "other.twice"', '"client.nope" = "other.nope"').replace(
        "use.twice", "use.nope"))
    (tmp_path / "other.py").write_text("def nope(x):\n    raise KeyError(x)\n")
    alone = polybus.run(app)
    one = polybus.run(app, {"modules.server.replication": 1})
    assert alone.result == ("at use", "an upstream call failed: 1", "nope on other-0")
    assert one.result == alone.result


@pytest.mark.parametrize("style", ["async", "async-demand(2)"])
def test_a_failed_promise_made_in_the_client_fails_a_replica_call_where_it_is_used(
        tmp_path: Path, style: str) -> None:
    """A replica's call given a failed promise of a call made in the client fails where
    its own promise is used, as with the producer on a replica: the error was raised at
    the consuming call, out of the program's ``try`` around its ``wait``."""
    app = write_app(tmp_path, server=SERVER, client=MIXED_CLIENT, toml=MIXED_TOML)
    (tmp_path / "other.py").write_text("def twice(x):\n    return 2 * x\n")
    style_set = {"modules.client.use.twice.callstyle": style}
    alone = polybus.run(app, style_set)
    one = polybus.run(app, {**style_set, "modules.server.replication": 1})
    assert alone.result == ("at use", "an upstream call failed: negative: -1", "boom")
    assert one.result == (*alone.result[:2], "boom on server-0")


CALLING_SERVER = """\
import numpy as np
import polybus

NAME = "twice"

def via(x):
    return polybus.use(NAME)(x) + 1     # (a name the configuration check cannot read)

def shares(x):
    return polybus.broadcast(np.ones(2))

def twice(x):
    return 2 * x
"""


@pytest.mark.parametrize(("name", "said"), [
    ("via", "calls use('twice'), but a"),
    ("shares", "calls polybus.broadcast(), but only the client")])
def test_a_use_the_module_makes_when_called_is_refused_as_on_a_replica(
        tmp_path: Path, name: str, said: str) -> None:
    """Documented as refused: a use() made at the call (not seen by the configuration's
    check) ran in the client, so the run worked at 0 replicas and failed at 1."""
    app = write_app(tmp_path, server=CALLING_SERVER, client=(
        f"from polybus import use\n\n{name} = use({name!r})\ntwice = use('twice')\n\n\n"
        "def main():\n"
        f"    return {name}(2)\n"), toml=(
        '[modules.server]\nsource = "server.py"\nreplication = 0\n\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
        f'[bind]\n"client.{name}" = "server.{name}"\n"client.twice" = "server.twice"\n'))
    for replicas in (0, 1):
        with pytest.raises(RemoteException) as e:
            polybus.run(app, {"modules.server.replication": replicas})
        assert e.value.remote_type == "UsageError" and said in e.value.remote_message
        assert "cannot call other modules" in e.value.remote_message or name == "shares"
