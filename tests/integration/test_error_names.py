"""An exception class of the user's module reaches the client named as the user knows
it (``server.InputError``), never by the name polybus imports the module under."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

from .conftest import cli

SERVER = """
    class InputError(Exception):
        pass

    def fail(i):
        if i > 0:
            raise InputError(f"custom failure {i}")
        raise ValueError(f"plain failure {i}")
"""

TOML = """
    [modules.server]
    source = "server.py"
    define.fail = {{ pool = "{pool}" }}

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.fail" = "server.fail"
"""


@pytest.mark.parametrize("pool", ["threads:1", "processes:1"])
def test_a_custom_exception_is_named_by_the_module_key(tmp_path: Path, pool: str) -> None:
    app = write_app(tmp_path, server=SERVER, toml=TOML.format(pool=pool), client="""
        from polybus import use
        from polybus.errors import RemoteException

        fail = use("fail")

        def main():
            out = []
            for i in (1, 0):
                try:
                    fail(i)
                except RemoteException as exc:
                    out.append([exc.remote_type, str(exc), exc.remote_traceback])
            return out
    """)
    (custom, custom_text, custom_tb), (plain, plain_text, plain_tb) = polybus.run(app).result
    assert custom == "server.InputError"
    assert custom_text.startswith("server.InputError: custom failure 1 (raised in fail on ")
    assert custom_tb.endswith("\nserver.InputError: custom failure 1\n"), custom_tb
    assert plain == "ValueError"  # (a built-in exception is named plainly)
    assert plain_text.startswith("ValueError: plain failure 0 (raised in fail on ")
    assert plain_tb.endswith("\nValueError: plain failure 0\n"), plain_tb
    assert "polybus_user_" not in custom_text + plain_text


def test_polybus_run_reports_the_types_by_their_module_keys(tmp_path: Path) -> None:
    """The run's report: a remote failure uncaught, and the client's own exception (whose
    traceback shows the remote one it was raised from)."""
    app = write_app(tmp_path / "uncaught", server=SERVER, toml=TOML.format(pool="threads:1"),
                    client="""
        from polybus import use

        fail = use("fail")

        def main():
            return fail(1)
    """)
    r = cli("run", app)
    assert r.returncode == 2, r.stderr
    assert "polybus run: error: server.InputError: custom failure 1 (raised in fail" in r.stderr
    assert "\nserver.InputError: custom failure 1\n" in r.stderr  # (the remote traceback's)
    assert "polybus_user_" not in r.stderr
    app = write_app(tmp_path / "own", server=SERVER, toml=TOML.format(pool="threads:1"), client="""
        from polybus import use

        fail = use("fail")

        class ClientError(Exception):
            pass

        def main():
            try:
                fail(1)
            except Exception as exc:
                raise ClientError("the client gave up") from exc
    """)
    r = cli("run", app)
    assert r.returncode == 1, r.stderr
    assert "polybus run: the client raised ClientError\n" in r.stderr
    assert r.stderr.rstrip().endswith("\nclient.ClientError: the client gave up"), r.stderr
    assert "\nserver.InputError: custom failure 1\n" in r.stderr
    assert "polybus_user_" not in r.stderr


def test_import_errors_and_a_clients_own_base_exception_name_the_module_key(
        tmp_path: Path) -> None:
    """A class of the module raised as it imports (`failed to import: server.E`), and a
    BaseException of the client's own raised by its entrypoint (`client.B`, its
    traceback from the user's frame): they said ``polybus_user_server.E``, and the
    latter came out as polybus's own traceback."""
    app = write_app(tmp_path / "import", server="""
        class E(Exception):
            pass

        raise E("not today")

        def fail(i):
            return i
    """, toml=TOML.format(pool="threads:1"), client="""
        from polybus import use

        fail = use("fail")

        def main():
            return fail(1)
    """)
    r = cli("run", app)
    assert r.returncode == 2, r.stderr
    assert "server.py) failed to import: server.E: not today at line 5" in r.stderr, r.stderr
    assert "polybus_user_" not in r.stderr
    app = write_app(tmp_path / "base", server=SERVER, toml=TOML.format(pool="threads:1"),
                    client="""
        class B(BaseException):
            pass

        def main():
            raise B("the client's own")
    """)
    r = cli("run", app)
    assert r.returncode == 1, r.stderr
    assert "polybus run: the client raised B\n" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("\nclient.B: the client's own"), r.stderr
    assert "polybus/cli" not in r.stderr and "polybus_user_" not in r.stderr
