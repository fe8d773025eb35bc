"""``replication = 0``: a module with no replicas, called in the client. Accepted as a
count (also through --set and in a MIL file), said by `check` in a note; each strategy
it cannot apply is a warning that it is ignored, never an error; what cannot work with
it (a [serve] route to it, a use() it makes, a worker started for it) is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import main as cli
from polybus.config import load, validate
from polybus.engines.served import replicas_in_order
from polybus.testing.apps import write_app, write_one_call_app

SERVER = """\
def f(x, b=None):
    return x

def g(x):
    return x
"""
CLIENT = """\
from polybus import use

f = use("f")
g = use("g")

def main():
    return f(1) + g(2)
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 0
{server}

[modules.client]
source = "client.py"
entrypoint = "main"
{client}

[bind]
"client.f" = "server.f"
"client.g" = "server.g"
"""


def _app(tmp_path: Path, server: str = "", client: str = "") -> Path:
    return write_app(tmp_path, server=SERVER, client=CLIENT,
                     toml=TOML.format(server=server, client=client))


def test_zero_is_accepted_and_starts_no_replica(tmp_path: Path) -> None:
    app = load(_app(tmp_path))
    server = app.modules["server"]
    assert server.in_client and server.replication == () and server.migration == ()
    assert app.servers() == [] and replicas_in_order(app) == []  # (no worker, rank, actor)
    assert [b.module for b in app.bindings] == ["server", "server"]
    assert set(server.define) == {"f", "g"}  # (filled in, as for a module with replicas)
    assert app.notes == ()  # (nothing ignored here: nothing to warn of)
    assert not app.modules["client"].in_client  # (no replication key: the client's default)


@pytest.mark.parametrize("override", ["modules.server.replication=0",
                                      'modules.server.replication="0"'])
def test_zero_by_override(tmp_path: Path, override: str) -> None:
    app = load(write_one_call_app(tmp_path, server_keys="replication = 3"), [override])
    assert app.modules["server"].in_client and app.servers() == []


def test_a_module_with_replicas_is_not_in_the_client(tmp_path: Path) -> None:
    app = load(_app(tmp_path), ["modules.server.replication=2"])
    assert not app.modules["server"].in_client and len(app.servers()) == 1


def test_a_negative_count_is_still_an_error(tmp_path: Path) -> None:
    _, errors = validate(_app(tmp_path), ["modules.server.replication=-1"])
    assert [(e.key, e.bare_message) for e in errors] == [
        ("modules.server.replication", "the replica count must be at least 0, got -1")]


def test_each_strategy_it_cannot_apply_is_a_warning(tmp_path: Path) -> None:
    app = load(_app(
        tmp_path,
        server='transport = "shm"\n'
               'define.f = { priority = "x", pool = 2, queue = 5, cache = ["b"], '
               'timeout = "1s" }\n'
               "define.g = {}\n",
        client='use.f = { callstyle = "async", loadratio = "1:1", aggregate = 4, '
               'transport = "ipc", forward = false }\n'
               'use.g = { callstyle = "async-demand(2)", balance = "least" }\n'))
    said = {(n.key, n.bare_message.partition(" is ignored: ")[0]) for n in app.notes}
    assert said == {
        ("modules.server.transport", "transport"),
        *((f"modules.server.define.f.{k}", k)
          for k in ("priority", "pool", "queue", "cache", "timeout")),
        *((f"modules.client.use.f.{k}", k)
          for k in ("loadratio", "aggregate", "transport", "forward")),
        ("modules.client.use.g.balance", "balance"),
    }
    one = next(n for n in app.notes if n.key == "modules.server.define.f.cache")
    assert "module 'server' has replication = 0 (called in the client)" in one.bare_message
    assert one.hint is not None and "modules.server.replication = 1 or more" in one.hint
    # (the call styles apply: no note; nor does any other note say these keys again)
    assert not any("callstyle" in str(n.key) for n in app.notes)
    assert len(app.notes) == len(said)


def test_the_same_options_with_replicas_are_not_warned_of(tmp_path: Path) -> None:
    app = load(_app(tmp_path, server='define.f = { cache = ["b"] }\ndefine.g = {}\n',
                    client='use.f = { callstyle = "async", loadratio = "1:1" }\n'),
               ["modules.server.replication=2"])
    assert app.notes == ()


@pytest.mark.parametrize("off", ["0", '"0B"', '"0KiB"'])
def test_aggregate_written_off_is_not_said_ignored(tmp_path: Path, off: str) -> None:
    """A sweep's baseline, `--vary modules.server.replication=0,2` beside `aggregate = 0`,
    was told "aggregate is ignored" of an option that asks for nothing (0 is off)."""
    app = load(_app(tmp_path, client=f'use.f = {{ callstyle = "async", aggregate = {off} }}\n'))
    assert app.notes == ()
    app = load(_app(tmp_path, client='use.f = { callstyle = "async", aggregate = 2 }\n'))
    assert [n.key for n in app.notes] == ["modules.client.use.f.aggregate"]


def test_a_load_ratio_of_any_length_is_not_an_error_with_zero(tmp_path: Path) -> None:
    # (with replicas, its shares must be as many as the replicas: an error)
    path = _app(tmp_path, client='use.f = { loadratio = "1:2:3" }\n')
    app = load(path)
    assert [n.key for n in app.notes] == ["modules.client.use.f.loadratio"]
    _, errors = validate(path, ["modules.server.replication=2"])
    assert [e.key for e in errors] == ["modules.client.use.f.loadratio"]


def test_a_use_call_in_a_module_with_zero_replicas_is_refused(tmp_path: Path) -> None:
    server = 'from polybus import use\n\nh = use("h")\n\ndef f(x):\n    return h(x)\n'
    path = write_one_call_app(tmp_path, server_keys="replication = 0", server=server)
    _, errors = validate(path)
    assert len(errors) == 1
    assert errors[0].bare_message.startswith(
        "module 'server' has replication = 0 and calls use('h') (server.py line 3), but a "
        "served module cannot call other modules")


def test_a_route_to_a_module_with_zero_replicas_is_refused(tmp_path: Path) -> None:
    path = write_one_call_app(tmp_path, server_keys="replication = 0",
                              tail='\n[serve.routes]\n"GET /f" = "server.f"\n')
    _, errors = validate(path)
    assert [(e.key, e.bare_message) for e in errors] == [(
        'serve.routes."GET /f"',
        "route target module 'server' has replication = 0 (called in the client's process), "
        "but `polybus serve` answers routes from replicas")]


def test_a_mil_file_may_say_zero(tmp_path: Path) -> None:
    write_one_call_app(tmp_path)
    cfg = tmp_path / "app.cfg"
    cfg.write_text('module client { source = "client.py" :: entrypoint = "main" ::\n'
                   '  use interface f :: }\n'
                   'module server { source = "server.py" ::\n'
                   '  define interface f : replication = 0 :: }\n'
                   'module app { instance client :: instance server ::\n'
                   '  bind client f server f :: }\n')
    app = load(cfg)
    assert app.modules["server"].in_client and app.servers() == []


def test_check_says_what_zero_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _app(tmp_path, server='define.f = { cache = ["b"] }\ndefine.g = {}\n')
    assert cli(["check", str(path), "--no-import"]) == 0
    out, err = capsys.readouterr()
    assert out == (f"{path}: ok (client client; servers server x0 (in the client); "
                   "2 binding(s))\n")
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: modules.server.replication = 0: no worker process is started for module "
        "'server'; f, g are called in the client process, in the calling thread, as plain "
        "Python calls (the sequential baseline). Arguments are passed as they are, not "
        "copied: a function that changes an argument in place changes the caller's "
        "object, unlike with replicas"]
    assert "warning: " in err and "modules.server.define.f.cache: cache is ignored" in err


def test_a_worker_for_a_module_with_zero_replicas_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _app(tmp_path)
    assert cli(["worker", "--config", str(path), "--as", "server",
                "--registry", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "[modules.server] of" in err and "has replication = 0" in err
    assert "no worker serves it" in err
