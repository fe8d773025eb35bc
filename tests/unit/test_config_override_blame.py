"""Overrides that change what a program is, not one option of it: a define table set
whole, a second entrypoint, an engine that needs a registry. Each acts as the same key
written in the file would, and a mistake in one is the override's."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.cli.main import main
from polybus.config import validate
from polybus.errors import ConfigError

SERVER = '''\
def add(a, b):
    return a + b


def square(x):
    return x * x


def boom():
    raise ValueError("boom")
'''
CLIENT = '''\
from polybus import use

square = use("square")


def main():
    return square(3)
'''
APP = '''\
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.square = { callstyle = "sync" }

[bind]
"client.square" = "server.square"
'''

Found = list[tuple[str | None, str | None, str, str | None]]


def check(tmp_path: Path, toml: str = APP, overrides: tuple[str, ...] = ()
          ) -> tuple[list[str] | None, Found]:
    """What the server module serves (None when invalid), and (file as the user sees
    it, key, message, hint) of every mistake."""
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    cfg, errors = validate(str(path), overrides)
    served = list(cfg.modules["server"].define) if cfg is not None else None
    return served, [("file" if e.file == str(path) else e.file, e.key, e.bare_message, e.hint)
                    for e in errors]


WHOLE = "modules.server.define={square = {}}"


def test_a_define_table_set_whole_lists_what_the_module_serves_without_one_in_the_file(
        tmp_path: Path) -> None:
    # The module went on serving add and boom: the table counted as options only.
    assert check(tmp_path, overrides=(WHOLE,)) == (["square"], [])
    # ... as it does on a file with a define table of its own.
    toml = APP.replace('source = "server.py"\n', 'source = "server.py"\ndefine.add = {}\n')
    assert check(tmp_path, toml, (WHOLE,)) == (["square"], [])
    # Added to after, or replacing options set before: still the list.
    sets = (WHOLE, "modules.server.define.add.pool=2")
    assert check(tmp_path, overrides=sets) == (["square", "add"], [])
    sets = ("modules.server.define.add.pool=2", WHOLE)
    assert check(tmp_path, overrides=sets) == (["square"], [])
    # From Python, a dict is the same table.
    path = tmp_path / "app.toml"
    path.write_text(APP)
    cfg, _ = validate(str(path), {"modules.server.define": {"square": {}}})
    assert cfg is not None and list(cfg.modules["server"].define) == ["square"]


def test_an_option_into_a_define_table_the_file_lacks_still_serves_everything(
        tmp_path: Path) -> None:
    assert check(tmp_path, overrides=("modules.server.define.square.pool=2",)) == (
        ["add", "square", "boom"], [])


def test_a_second_entrypoint_from_set_is_the_override_s_mistake(tmp_path: Path) -> None:
    # It was said against the file's modules.client.entrypoint, which is right.
    message = ("several modules have an entrypoint (server, client); exactly one (the "
               "client) may")
    assert check(tmp_path, overrides=("modules.server.entrypoint=add",)) == (
        None, [("--set", "modules.server.entrypoint", message, None)])
    # Two in the file: the second in the file's order, as before.
    toml = APP.replace('source = "server.py"\n', 'source = "server.py"\nentrypoint = "add"\n')
    assert check(tmp_path, toml) == (
        None, [("file", "modules.client.entrypoint", message, None)])


HOSTS_NEED = "the hosts engine uses workers already running; it needs their registry"


def test_check_says_the_hosts_engine_needs_a_registry_where_the_engine_was_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # check said ok, and run failed blaming the file, though --set chose the engine.
    check(tmp_path)
    app = str(tmp_path / "app.toml")
    assert main(["check", app, "--no-import", "--set", "cluster.engine=hosts"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: --set: cluster.engine: {HOSTS_NEED} (add --set "
        "'cluster.registry=\"HOST:PORT\"', or pass --registry HOST:PORT to run or serve)")
    assert main(["check", app, "--no-import", "--set", "cluster.engine=hosts",
                 "--set", "cluster.registry=127.0.0.1:7700"]) == 0
    with pytest.raises(ConfigError) as info:  # (from Python: the overrides, and registry=)
        polybus.run(app, {"cluster.engine": "hosts"})
    assert (info.value.file, info.value.key, info.value.bare_message) == (
        "overrides", "cluster.engine", HOSTS_NEED)
    assert info.value.hint is not None and 'registry="HOST:PORT"' in info.value.hint


def test_started_cluster_says_the_hosts_engine_needs_a_registry_where_it_was_set(
        tmp_path: Path) -> None:
    # (from Python, given an app loaded without the run's check: it named the file)
    from polybus.config import load
    from polybus.config.origin import SET
    from polybus.runner import started_cluster
    check(tmp_path)
    path = str(tmp_path / "app.toml")
    for sets, where in ((("cluster.engine=hosts",), "--set"), ((), path)):
        toml = APP + ('' if sets else '\n[cluster]\nengine = "hosts"\n')
        (tmp_path / "app.toml").write_text(toml)
        app = load(path, sets, SET)
        with pytest.raises(ConfigError) as info, started_cluster(app):
            pass
        assert (info.value.file, info.value.key, info.value.bare_message) == (
            where, "cluster.engine", HOSTS_NEED)


def test_a_hosts_engine_in_the_file_without_a_registry_is_the_file_s(tmp_path: Path) -> None:
    toml = APP + '\n[cluster]\nengine = "hosts"\n'
    check(tmp_path, toml)
    path = str(tmp_path / "app.toml")
    _, errors = validate(path, running=True)
    assert [(e.file, e.key, e.bare_message) for e in errors] == [
        (path, "cluster.engine", HOSTS_NEED)]
    # A worker, or a run given its registry apart (--registry), needs none in the file.
    cfg, errors = validate(path)
    assert errors == [] and cfg is not None and cfg.cluster.engine == "hosts"


@pytest.mark.parametrize("override", ["modules.client.kwargs.x=4",
                                      "modules.client.kwargs={x = 4}"])
def test_a_kwarg_from_set_that_the_file_s_args_give_too_is_the_override_s_mistake(
        tmp_path: Path, override: str) -> None:
    # It was said against the file's modules.client.args, which the user had not changed.
    toml = APP.replace('entrypoint = "main"', 'entrypoint = "main"\nargs = [3]')
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT.replace("def main():", "def main(x):"))
    path = tmp_path / "app.toml"
    path.write_text(toml)
    _, errors = validate(str(path), (override,))
    assert [(e.file, e.key, e.bare_message, e.hint) for e in errors] == [(
        "--set", "modules.client.kwargs.x", "the entrypoint main(x) cannot take these "
        "arguments: multiple values for argument 'x'",
        f"modules.client.args in {path} gives it by position already")]
    # Both from the file: the file's args, as before.
    path.write_text(toml.replace("args = [3]", "args = [3]\nkwargs = { x = 4 }"))
    _, errors = validate(str(path))
    assert [(e.file, e.key) for e in errors] == [(str(path), "modules.client.args")]
