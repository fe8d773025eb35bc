"""A run nested in another's entrypoint, each with a module of the same key at
``replication = 0``: the inner run's end leaves the outer run's module as one called in
the client (client/inclient.py), its use() calls still refused as a replica's are."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import RemoteException
from polybus.testing.apps import write_app

CALLING_SERVER = """\
import polybus

NAME = "twice"

def via(x):
    return polybus.use(NAME)(x) + 1     # (a name the configuration check cannot read)

def twice(x):
    return 2 * x
"""


def test_a_nested_run_leaves_the_outer_runs_refusal_in_place(tmp_path: Path) -> None:
    """A run nested in the entrypoint, with a module of the same key at 0 replicas too:
    its end forgot the outer run's module as one called in the client, whose use()
    then ran in the client (as a replica's is refused)."""
    inner = write_app(tmp_path / "inner", server="def twice(x):\n    return 2 * x\n",
                      client="def main():\n    return 0\n", toml=(
                          '[modules.server]\nsource = "server.py"\nreplication = 0\n\n'
                          '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
                          'use.twice = {}\n\n[bind]\n"client.twice" = "server.twice"\n'))
    app = write_app(tmp_path / "outer", server=CALLING_SERVER, client=(
        "import polybus\nfrom polybus import use\n\nvia = use('via')\ntwice = use('twice')\n\n\n"
        f"def main():\n    polybus.run({str(inner)!r})\n    return via(2)\n"),
        toml=('[modules.server]\nsource = "server.py"\nreplication = 0\n\n'
              '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n\n'
              '[bind]\n"client.via" = "server.via"\n"client.twice" = "server.twice"\n'))
    with pytest.raises(RemoteException) as e:
        polybus.run(app)
    assert e.value.remote_type == "UsageError", e.value
    assert "calls use('twice'), but a" in e.value.remote_message
