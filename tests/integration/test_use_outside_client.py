"""use()d interfaces called where no session is: in a replica, or while the client module
is imported. A new-user trial got "called outside a polybus run; start the program with
'polybus run app.toml'" for both, from a program started exactly so."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import cli
from polybus.testing.apps import write_app

TOML = """\
[modules.server]
source = "server.py"
replication = 1
define.f = POOL

[modules.other]
source = "other.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.f" = "server.f"
"""
# The name built at run time: no check can see it, so the call itself must say it.
SERVER = 'from polybus import use\n\nother = use("oth" + "er")\n\n\ndef f(x):\n    return other(x) + 1\n'
CLIENT = "from polybus import use\n\nf = use('f')\n\n\ndef main():\n    return f(3)\n"
REPLICA = ("module 'server' is served by replicas and calls use('other'), but a replica "
           "cannot call other modules: only the client (the module with the entrypoint) "
           "calls the interfaces [bind] binds; call both from the client instead")


@pytest.mark.parametrize("pool", ["{}", '{ pool = "processes:1" }'])
def test_a_replica_calling_another_module_is_told_it_cannot_at_the_call(
        tmp_path: Path, pool: str) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML.replace("POOL", pool))
    (tmp_path / "other.py").write_text("def g(x):\n    return x * 2\n")
    p = cli("run", "app.toml", "--quiet", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert REPLICA in p.stderr and "(raised in f on server-0)" in p.stderr
    assert "outside a polybus run" not in p.stderr
    # The replica's traceback ends at the user's line that made the call, the type
    # named as the replica's other polybus failures name theirs (MessageTooLarge)
    tail = p.stderr.split("--- remote traceback ---\n", 1)[1].strip().splitlines()
    assert "stubs.py" not in p.stderr and "polybus.errors" not in p.stderr, p.stderr
    frames = [line for line in tail if line.lstrip().startswith("File ")]
    assert frames[-1].endswith('server.py", line 7, in f'), tail
    assert tail[-1].startswith("UsageError: " + REPLICA[:40]), tail
    # Named in the source, `check` (and so `run`) refuses it before anything starts.
    (tmp_path / "server.py").write_text(SERVER.replace('"oth" + "er"', '"other"'))
    (tmp_path / "app.toml").write_text(TOML.replace("POOL", pool)
                                       + '"server.other" = "other.g"\n')
    p = cli("check", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert 'bind."server.other": module \'server\' is served by replicas and calls ' \
           "use('other') (server.py line 3), but a replica cannot call other modules" \
           in p.stderr


def test_a_call_at_the_client_modules_import_says_to_call_it_from_the_entrypoint(
        tmp_path: Path) -> None:
    client = CLIENT.replace("\n\n\ndef", "\nEARLY = f(1)\n\n\ndef")
    write_app(tmp_path, server="def f(x):\n    return x\n", client=client,
              toml=TOML.replace("POOL", "{}"))
    (tmp_path / "other.py").write_text("def g(x):\n    return x * 2\n")
    # (it said "use('f') was called ... or from a function it calls at line 4": the
    # place after the advice, as if it were the function's)
    said = ("failed to import: UsageError: f(1) (client.py, line 4) was called while the "
            "client module 'client' was being imported, before the run's session starts: "
            "call it from the entrypoint, main(), or from a function it calls\n")
    for command in ("check", "run"):
        p = cli(command, "app.toml", cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        assert said in p.stderr and "outside a polybus run" not in p.stderr, p.stderr
