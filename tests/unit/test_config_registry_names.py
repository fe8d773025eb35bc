"""The names a run registers are checked against the registry's limits when the
configuration loads (config/registrynames.py): a module key, a replica name (from a
count: ``<key>-0``...; or as written) and a served interface, each named with its
limit, by `polybus check` and by `polybus run` before anything starts. A module key of
300 characters passed `check`, and `run` failed inside polybus (``OSError: [Errno 36]
File name too long`` making its replica's log file), or the registry refused it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config_errors import errors  # tests/unit

from polybus.cli.main import main as cli
from polybus.config import validate
from polybus.config.registrynames import REPLICA_NAME_MAX
from polybus.registry.limits import INTERFACES_MAX, NAME_MAX

SERVER = "def square(x):\n    return x * x\n"
CLIENT = """from polybus import use

square = use("square")


def main():
    return int(square(3))
"""


def toml(key: str = "server", replication: str = "2", fn: str = "square",
         define: bool = False) -> str:
    return (f'[modules.{key}]\nsource = "server.py"\nreplication = {replication}\n'
            + (f"define.{fn} = {{}}\n" if define else "")
            + '\n[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
            + f'[bind]\n"client.square" = "{key}.{fn}"\n')


def found(tmp_path: Path, text: str, server: str = SERVER) -> list[tuple[str | None, str]]:
    return [(k, m) for k, m, _ in errors(tmp_path, text, server=server, client=CLIENT)]


def test_a_module_key_over_the_registrys_limit_is_refused_naming_it(tmp_path: Path) -> None:
    key = "s" * (NAME_MAX + 1)
    assert found(tmp_path, toml(key)) == [
        (f"modules.{key}", f"module key '{'s' * 40}...' is {NAME_MAX + 1} characters long, "
                           f"over the limit of {NAME_MAX} (the registry's, for a module's "
                           f"name)")]


def test_the_replica_names_a_count_makes_from_the_key_are_checked(tmp_path: Path) -> None:
    """``<key>-0``, ``<key>-1``...: a key two short of the limit takes up to ten replicas
    (``<key>-9``), not eleven (``<key>-10``)."""
    key = "s" * (REPLICA_NAME_MAX - 2)
    assert found(tmp_path, toml(key, "10")) == []
    (where, message), = found(tmp_path, toml(key, "11"))
    assert where == f"modules.{key}"
    assert message.startswith(f"replica name '{'s' * 40}...' is {REPLICA_NAME_MAX + 1} "
                              f"characters long, over the limit of {REPLICA_NAME_MAX} (a "
                              "replica's name is registered, and names its log file; a "
                              "count's replicas are named after their module's key")


def test_a_replica_name_as_written_is_checked_at_its_replication(tmp_path: Path) -> None:
    name = "r" * (REPLICA_NAME_MAX + 1)
    (where, message), = found(tmp_path, toml(replication=f'"{name}:speed=1, r2"'))
    assert where == "modules.server.replication"
    assert message.startswith(f"replica name '{'r' * 40}...' is {REPLICA_NAME_MAX + 1:,} "
                              f"characters long, over the limit of {REPLICA_NAME_MAX}")


@pytest.mark.parametrize("define", [False, True])
def test_an_interface_over_the_registrys_limit_is_refused(tmp_path: Path, define: bool) -> None:
    fn = "f" * (NAME_MAX + 1)
    server = f"def {fn}(x):\n    return x * x\n"
    (where, message), = found(tmp_path, toml(fn=fn, define=define), server=server)
    assert where == ("modules.server.define." + fn if define else "modules.server")
    assert message == (f"interface '{'f' * 40}...' is {NAME_MAX + 1} characters long, over "
                       f"the limit of {NAME_MAX} (the registry's, for an interface's name)")
    # Called in the client (replication = 0), it is not registered: nothing to refuse.
    assert found(tmp_path, toml(fn=fn, define=define, replication="0"), server=server) == []


def test_a_routes_http_form_of_an_interface_is_checked_too(tmp_path: Path) -> None:
    """A [serve] route's function is registered as ``<name>@http`` too."""
    fn = "f" * (NAME_MAX - 2)
    (tmp_path / "web.py").write_text(f"def {fn}():\n    return 'hi'\n")
    path = tmp_path / "app.toml"
    path.write_text(f'[modules.web]\nsource = "web.py"\n\n[serve.routes]\n"GET /" = "web.{fn}"\n')
    config, errs = validate(path)
    assert config is None
    assert [(e.key, e.bare_message) for e in errs] == [
        ("modules.web", f"interface '{'f' * 40}...' (the form of it a [serve] route calls) "
                        f"is {NAME_MAX + 3} characters long, over the limit of {NAME_MAX} "
                        "(the registry's, for an interface's name)")]


def test_more_interfaces_than_the_registry_takes_are_refused(tmp_path: Path) -> None:
    server = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(INTERFACES_MAX))
    server += "def square(x):\n    return x * x\n"
    assert found(tmp_path, toml(), server=server) == [
        ("modules.server", f"module 'server' serves {INTERFACES_MAX + 1:,} interfaces, over "
                           f"the registry's limit of {INTERFACES_MAX:,} a replica")]


def test_check_and_run_refuse_a_long_module_key_before_anything_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = "s" * 300
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    app = tmp_path / "app.toml"
    app.write_text(toml(key))
    for command in ("check", "run"):
        assert cli([command, str(app)]) == 2
        err = capsys.readouterr().err
        assert (f"module key '{'s' * 40}...' is 300 characters long, over the limit of "
                f"{NAME_MAX} (the registry's, for a module's name)") in err, err
        assert "Traceback" not in err
