"""A served module's use(): refused by `check` (config/replicause.py), and said at the
call in a replica (client/stubs.py); a new-user trial got "called outside a polybus
run; start the program with 'polybus run app.toml'", under `polybus run`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from polybus import use
from polybus.client import stubs
from polybus.config import validate
from polybus.errors import UsageError

SERVER = 'from polybus import use\n\nother = use("other")\n\n\ndef f(x):\n    return other(x) + 1\n'
OTHER = "def g(x):\n    return x * 2\n"
CLIENT = 'from polybus import use\n\nf = use("f")\n\n\ndef main():\n    return f(3)\n'
TOML = """\
[modules.server]
source = "server.py"
replication = 1

[modules.other]
source = "other.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
CLIENT_EXTRA

[bind]
"client.f" = "server.f"
BIND
"""


def _errors(tmp_path: Path, *, bind: str = '"server.other" = "other.g"', extra: str = "",
            client: str = CLIENT, server: str = SERVER
            ) -> list[tuple[str | None, str, str | None]]:
    (tmp_path / "server.py").write_text(server)
    (tmp_path / "other.py").write_text(OTHER)
    (tmp_path / "client.py").write_text(client)
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("BIND", bind).replace("CLIENT_EXTRA", extra))
    config, found = validate(str(path))
    assert (config is None) == bool(found)
    return [(e.key, e.bare_message, e.hint) for e in found]


REFUSED = ("module 'server' is served by replicas and calls use('other') (server.py line "
           "3), but a replica cannot call other modules: only the client (the module with "
           "the entrypoint) calls the interfaces [bind] binds")


def test_a_binding_of_a_served_module_is_refused_with_what_to_do_instead(
        tmp_path: Path) -> None:
    [(key, message, hint)] = _errors(tmp_path)
    assert (key, message) == ('bind."server.other"', REFUSED)
    assert hint is not None and hint.startswith("call both from the client instead")
    assert "docs/strategies.md, forward" in hint


def test_a_served_modules_use_without_a_binding_is_refused_not_sent_to_bind(
        tmp_path: Path) -> None:
    # (it said "unbound interface 'other' ... add to [bind]", which a run then failed on)
    [(key, message, hint)] = _errors(tmp_path, bind="")
    assert (key, message) == ("modules.server", REFUSED)
    assert hint is not None and hint.startswith("call both from the client instead")


def test_a_client_that_also_has_replicas_keeps_its_bindings(tmp_path: Path) -> None:
    # (its entrypoint calls them; its replicas would be told at the call, as below)
    client = CLIENT.replace('f = use("f")', 'f = use("f")\ng = use("g")')
    assert _errors(tmp_path, bind='"client.g" = "other.g"', extra="replication = 1",
                   client=client, server=OTHER.replace("g(", "f(")) == []


@pytest.fixture
def phase() -> Iterator[None]:
    yield
    stubs._phase[0] = None


def test_a_call_in_a_replica_says_a_replica_cannot_call_other_modules(phase: None) -> None:
    stubs.serving("server")
    with pytest.raises(UsageError) as e:
        use("other")(1)
    said = str(e.value)
    assert said.startswith("module 'server' is served by replicas and calls use('other'), "
                           "but a replica cannot call other modules")
    assert "call both from the client instead" in said and "outside" not in said


ONE_FILE = ('from polybus import use\n\n\ndef work(i):\n    return i * i\n\n\n'
            'work_remote = use("work_remote")\n\n\ndef main():\n    return work_remote(3)\n')
ONE_FILE_TOML = """\
[modules.srv]
source = "one.py"
replication = 2
define.work = {}

[modules.cli]
source = "one.py"
entrypoint = "main"

[bind]
"cli.work_remote" = "srv.work"
"""


def test_a_served_module_in_the_clients_own_file_is_told_to_split_the_file(
        tmp_path: Path) -> None:
    # A new-user trial's Ray-style port, one file for the work and main(): it was told
    # "call both from the client instead", which it already did.
    (tmp_path / "one.py").write_text(ONE_FILE)
    (tmp_path / "app.toml").write_text(ONE_FILE_TOML)
    config, found = validate(str(tmp_path / "app.toml"))
    [e] = found
    assert config is None
    assert (e.key, e.bare_message) == (
        "modules.srv", "module 'srv' is served by replicas from one.py, the file of the "
        "client module 'cli', and so its replicas import that module's use('work_remote') "
        "(one.py line 8), but a replica cannot call other modules: only the client (the "
        "module with the entrypoint) calls the interfaces [bind] binds")
    assert e.hint == ("put the client's code (the entrypoint and its use() calls) in a "
                      "file of its own, and the served functions in another")


def test_broadcast_in_a_replica_says_broadcast_is_the_clients(phase: None) -> None:
    from polybus import broadcast

    stubs.serving("server")
    with pytest.raises(UsageError) as e:
        broadcast(b"abc")
    said = str(e.value)
    assert said == ("module 'server' is served by replicas and calls polybus.broadcast(), "
                    "but only the client (the module with the entrypoint) broadcasts; "
                    "broadcast the value from the client and pass the handle to this "
                    "call, or make the value on the replica")
    assert "promise" not in said


def test_a_use_key_on_a_served_module_is_said_as_a_key_not_a_call(tmp_path: Path) -> None:
    # (from a new-user trial: a use.f table put under [modules.server] by mistake was
    # said as "module 'server' ... calls use('f')", which its code does not)
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(TOML.replace("[modules.other]\nsource = \"other.py\"\nreplication = 1\n",
                                 "").replace("BIND", "").replace("CLIENT_EXTRA", "")
                    .replace('replication = 1\n', 'replication = 1\nuse.f = { callstyle = '
                             '"async" }\n', 1))
    _, found = validate(str(path))
    [(key, message, hint)] = [(e.key, e.bare_message, e.hint) for e in found]
    assert key == "modules.server.use.f"
    assert message == ("module 'server' is served by replicas and has a use.f table, but a "
                       "replica cannot call other modules: only the client (the module "
                       "with the entrypoint) calls the interfaces [bind] binds")
    assert hint == ("a use.f table says how the client calls f: move it to the client's "
                    "table, [modules.client]")
