"""A key written in the wrong table is told the table it belongs to, not a spelling of
the table it is in: ``engine`` in a module's table was "did you mean 'define'?", and
``listen`` above the file's first header "did you mean 'cluster'?"."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate
from unit.test_config_ranges import CLIENT, SERVER

BASE = '''\
[modules.server]
source = "server.py"
define.compare = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.compare = { callstyle = "async" }

[bind]
"client.compare" = "server.compare"

[cluster]
heartbeat = 1
'''
TOP = "the file's top level (a key above its first [table] header is there)"


def _found(tmp_path: Path, toml: str) -> list[tuple[str | None, int | None, str, str | None]]:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "client.py").write_text(CLIENT)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    _, errors = validate(str(path))
    return [(e.key, e.line, e.bare_message, e.hint) for e in errors]


@pytest.mark.parametrize(("old", "new", "key", "line", "hint"), [
    # [cluster]'s keys above every header, where a file begins
    (None, 'engine = "local"', "engine", 1,
     f"'engine' is a key of [cluster]: cluster.engine, not of {TOP}"),
    # was "did you mean 'cluster'?"
    (None, 'listen = "127.0.0.1:0"', "listen", 1,
     f"'listen' is a key of [serve]: serve.listen, not of {TOP}"),
    (None, 'source = "server.py"', "source", 1,
     f"'source' is a key of a module's table: modules.<key>.source, not of {TOP}"),
    (None, "pool = 4", "pool", 1, "'pool' is a key of an interface's define table: "
     f"modules.<key>.define.<iface>.pool, not of {TOP}"),
    # was "did you mean 'define'?"
    ("[modules.server]", 'engine = "mpi"', "modules.server.engine", 2,
     "'engine' is a key of [cluster]: cluster.engine, not of a module's table"),
    ("[modules.server]", "max_frame = \"1MiB\"", "modules.server.max_frame", 2,
     "'max_frame' is a key of [cluster]: cluster.max_frame, not of a module's table"),
    # a module's key written after [cluster], which takes it
    ("[cluster]", "replication = 2", "cluster.replication", 14,
     "'replication' is a key of a module's table: modules.<key>.replication, not of "
     "[cluster]"),
    # a near spelling of the table's own key is still said, first
    ("[cluster]", 'listen = "0.0.0.0:8080"', "cluster.listen", 14,
     "did you mean 'listen_host'? 'listen' is a key of [serve]: serve.listen, not of "
     "[cluster]"),
    ('define.compare = {}', 'define.compare = { spin = "0" }',
     "modules.server.define.compare.spin", 3, "'spin' is a key of the module's table: modules.server.spin, not of an "
     "interface's define table"),
    ('use.compare = { callstyle = "async" }', 'use.compare = { callstyle = "async", pickle = '
     'true }', "modules.client.use.compare.pickle", 8, "'pickle' is a key of the serving module's "
     "table: modules.<key>.pickle, not of an interface's use table"),
])
def test_a_key_in_the_wrong_table_is_told_its_table(
        tmp_path: Path, old: str | None, new: str, key: str, line: int, hint: str) -> None:
    """``new`` put in place of the line ``old`` (a header: after it; None: first)."""
    if old is None:
        toml = f"{new}\n{BASE}"
    elif old.startswith("["):
        toml = BASE.replace(f"{old}\n", f"{old}\n{new}\n", 1)
    else:
        toml = BASE.replace(f"{old}\n", f"{new}\n", 1)
    assert _found(tmp_path, toml) == [(key, line, f"unknown key {key.rsplit('.')[-1]!r}",
                                       hint)]


def test_a_serve_table_with_a_cluster_key_says_so(tmp_path: Path) -> None:
    toml = BASE.replace('[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
                        'use.compare = { callstyle = "async" }\n', "").replace(
        '[bind]\n"client.compare" = "server.compare"\n',
        '[serve]\nengine = "local"\nroutes = { "GET /" = "server.compare" }\n')
    found = _found(tmp_path, toml)
    assert ("serve.engine", 7, "unknown key 'engine'",
            "'engine' is a key of [cluster]: cluster.engine, not of [serve]") in found, found


def test_a_misspelling_in_its_own_table_is_said_as_before(tmp_path: Path) -> None:
    toml = BASE.replace("heartbeat = 1", "hartbeat = 1")
    assert _found(tmp_path, toml) == [("cluster.hartbeat", 14, "unknown key 'hartbeat'",
                                       "did you mean 'heartbeat'?")]
