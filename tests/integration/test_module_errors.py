"""A module that does not import: `check` finds it (importing in a child process), and
`run` says which module, file and line, with the user's frames only."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pytest

from integration.conftest import ROOT, alive, cli
from polybus.testing.apps import write_app

TOML = """\
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.f" = "server.f"
"""
SERVER = "def f(x):\n    return x\n"
CLIENT = "from polybus import use\nf = use('f')\n\n\ndef main():\n    return f(1)\n"


def assert_users_terms(stderr: str) -> None:
    """No polybus-internal frame, no importlib frame: only what the user wrote."""
    assert "polybus/" not in stderr.replace("polybus/tests", "")
    assert "<frozen" not in stderr and "Traceback (most recent call last)" not in stderr


@pytest.mark.parametrize(("server", "client", "expected"), [
    ("import numpyy\n\n" + SERVER, CLIENT,
     "module 'server' (server.py) failed to import: ModuleNotFoundError: No module named "
     "'numpyy' at line 1"),
    (SERVER, "import helper\n" + CLIENT,
     "module 'client' (client.py) failed to import: ZeroDivisionError: division by zero "
     "at line 1"),
    ("from quiet import g\n\n" + SERVER, CLIENT,
     "module 'server' (server.py) failed to import: ImportError: cannot import name 'g' "
     "from 'quiet'"),
    (SERVER + "\nf = 3\n", CLIENT,
     "module 'server' (server.py): 'f', which the configuration names, is an int, "
     "not a function once the module is imported"),
    (SERVER, CLIENT.replace("def main():\n", "def main():\n    yield 0\n"),
     "module 'client' (client.py): 'main' is a generator function (it has yield)"),
], ids=["missing-import", "helper-raises", "missing-name", "not-a-function",
        "generator-entrypoint"])
def test_check_imports_each_module_and_names_file_and_line(
        tmp_path: Path, server: str, client: str, expected: str) -> None:
    app = write_app(tmp_path, server=server, client=client, toml=TOML)
    (tmp_path / "helper.py").write_text("x = 1\ny = x / 0\n")
    (tmp_path / "quiet.py").write_text("h = 1\n")
    p = cli("check", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert expected in p.stderr
    # (one that imported and lacks what the configuration names did not fail to import)
    assert p.stderr.rstrip().endswith("1 problem(s) found importing the modules of app.toml")
    assert_users_terms(p.stderr)
    assert cli("check", "--no-import", app).returncode == 0


def test_check_runs_a_modules_top_level_in_a_child_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli import cmd_check

    mark = tmp_path / "mark"
    server = f"import os\nopen({str(mark)!r}, 'a').write(str(os.getpid()))\n\n" + SERVER
    app = write_app(tmp_path, server=server, client=CLIENT, toml=TOML)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2] / "src")
                       + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = argparse.Namespace(config=str(app), set=[], no_import=False, host=None)
    before = sys.modules.get("polybus_user_server")  # (an earlier test's, in this process)
    assert cmd_check.main(args) == 0, capsys.readouterr().err
    assert mark.read_text() and int(mark.read_text()) != os.getpid()  # once, elsewhere
    assert sys.modules.get("polybus_user_server") is before  # not imported here


def test_run_reports_a_server_that_does_not_import_in_a_few_lines(tmp_path: Path) -> None:
    write_app(tmp_path, server="import numpyy\n\n" + SERVER, client=CLIENT, toml=TOML)
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2
    assert "could not start: module 'server' (server.py) failed to import: " \
           "ModuleNotFoundError: No module named 'numpyy' at line 1" in p.stderr
    assert 'server.py", line 1, in <module>' in p.stderr
    assert_users_terms(p.stderr)
    assert len(p.stderr.strip().splitlines()) <= 4, p.stderr


def test_run_reports_a_client_that_does_not_import_in_a_few_lines(tmp_path: Path) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT.replace("\n\ndef", "\n1 / 0\n\ndef"),
              toml=TOML)
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2
    assert "module 'client' (client.py) failed to import: ZeroDivisionError: division by " \
           "zero at line 4" in p.stderr
    assert_users_terms(p.stderr)
    assert len(p.stderr.strip().splitlines()) <= 4, p.stderr


# Line 3 blocks; line 2 says the import has begun (the test waits for it, not a time).
BLOCKING = "import time\nopen({mark!r}, 'w').close()\ntime.sleep(3600)\n\n" + SERVER


def test_a_server_blocking_at_import_is_named_when_its_worker_does_not_register(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # It was "workers s-0 did not register within 60 s", and no more.
    from polybus.config import load
    from polybus.engines.local import LocalEngine
    from polybus.errors import TransportError

    mark = tmp_path / "importing"
    app = write_app(tmp_path, server=BLOCKING.format(mark=str(mark)), client=CLIENT,
                    toml=TOML.replace("replication = 2", "replication = 1"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep
                       + os.environ.get("PYTHONPATH", ""))
    engine = LocalEngine(load(app), start_timeout=0.5)  # (the run's own: 60 s)
    wait_ready = engine._wait_ready
    pids: list[int] = []

    def once_importing() -> None:
        pids.extend(p.pid for _, p, _ in engine.procs)
        for _ in range(1500):
            if mark.exists():
                break
            time.sleep(0.02)
        wait_ready()

    monkeypatch.setattr(engine, "_wait_ready", once_importing)
    try:
        with pytest.raises(TransportError) as info:
            engine.start()
    finally:
        engine.stop()  # (a no-op when start stopped it)
    assert str(info.value) == (
        "worker server-0 did not register within 0.5 s: a worker imports its module before "
        "it registers, and slow or blocking top-level code in server.py keeps it from "
        "registering; server-0 was still running, at server.py line 3")
    assert len(pids) == 1 and not alive(pids[0])


def test_run_names_workers_slow_to_register_while_it_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # `polybus run` waited 60 s in silence on such a module (`check` says it after 2 s).
    from polybus.config import load
    from polybus.engines.local import LocalEngine
    from polybus.errors import TransportError

    app = write_app(tmp_path, server=BLOCKING.format(mark=str(tmp_path / "m")),
                    client=CLIENT, toml=TOML)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep
                       + os.environ.get("PYTHONPATH", ""))
    engine = LocalEngine(load(app), start_timeout=0.5, slow=0.0)  # (the run's: 60 s, 2 s)
    with caplog.at_level("WARNING", logger="polybus.engine"), \
            pytest.raises(TransportError, match=r"did not register within 0\.5 s"):
        engine.start()
    assert caplog.messages == [
        "polybus: workers server-0, server-1 not registered after 0 s: a worker imports "
        "its module (server.py) before it registers; waiting up to 0.5 s for it"]


def test_check_names_a_module_slow_to_import_and_the_line_a_hung_one_was_at(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `polybus check` waited 60 s in silence on such a module.
    from polybus.config import load
    from polybus.usercode import check_imports

    app = write_app(tmp_path, server=BLOCKING.format(mark=str(tmp_path / "m")),
                    client=CLIENT, toml=TOML)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src") + os.pathsep
                       + os.environ.get("PYTHONPATH", ""))
    said: list[str] = []
    problems = check_imports(load(app), timeout=1.0, notice=said.append, slow=0.2)
    assert ("importing module 'server' (server.py) is taking more than 0.2 s; waiting up "
            "to 1 s for it") in said
    assert problems == ["module 'server' (server.py): importing it did not finish within "
                        "1 s (does its top-level code wait or loop?); it was at line 3"]


def test_async_def_functions_are_named_not_run_into_a_coroutine(tmp_path: Path) -> None:
    """An async def entrypoint printed '<coroutine object ...>' with rc 0, and a served
    one failed with advice to set pickle = true (found by a new-user run). `check` and
    `run` now name an async entrypoint; a replica serves an async function as one whose
    every call fails with the reason (a module may hold async helpers it does not serve),
    and the module's other functions are served."""
    server = SERVER + "\n\nasync def g(x):\n    return x\n"
    client = ("from polybus import use\nf = use('f')\ng = use('g')\n\n\nasync def amain():\n"
              "    return 1\n\n\ndef main():\n    try:\n        g(1) + 0\n"
              "    except Exception as exc:\n        return [type(exc).__name__, str(exc), f(2)]\n")
    write_app(tmp_path, server=server, client=client, toml=TOML + '"client.g" = "server.g"\n')
    note = "is an async def function: polybus calls plain functions"
    p = cli("check", "app.toml", "--set", "modules.client.entrypoint=amain", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"module 'client' (client.py): 'amain' {note}" in p.stderr
    p = cli("run", "app.toml", "--quiet", "--set", "modules.client.entrypoint=amain",
            cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert f"modules.client.entrypoint: 'amain' {note}" in p.stderr
    assert "coroutine" not in p.stdout
    p = cli("run", "app.toml", "--quiet", "--json", "out.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import json

    kind, message, value = json.loads((tmp_path / "out.json").read_text())["result"]
    assert kind == "RemoteTypeError" and f"'g' {note}" in message and value == 2
