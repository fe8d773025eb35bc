"""Every kind of configuration mistake: its message, its dotted key, its hint. Here the
configuration's own keys, types and values; mistakes found against the modules' sources
(entrypoints, defines, bindings, use calls): test_config_errors_sources.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

SERVER = '''\
def compare(query: str, entry: str) -> int:
    return 0


def score(a, /, b, *rest, scale=1, **options):
    return 0


def _helper():
    pass


class Table:
    def compare(self):
        pass
'''

CLIENT = '''\
from polybus import use

compare = use("compare")


def main(queries, entry):
    return [compare(q, entry) for q in queries]


def _setup():
    pass
'''

BASE = '''\
[modules.server]
source = "server.py"
replication = 4
define.compare = { priority = "len(query)" }

[modules.client]
source = "client.py"
entrypoint = "main"
args = [["ACGT"], "ACGT"]
use.compare = { callstyle = "async-demand(5)" }

[bind]
"client.compare" = "server.compare"
'''

Found = list[tuple[str | None, str, str | None]]


def errors(tmp_path: Path, toml: str, *, server: str = SERVER, client: str = CLIENT,
           **sources: str) -> Found:
    (tmp_path / "server.py").write_text(server)
    (tmp_path / "client.py").write_text(client)
    for name, text in sources.items():
        (tmp_path / f"{name}.py").write_text(text)
    path = tmp_path / "app.toml"
    path.write_text(toml)
    config, found = validate(str(path))
    assert (config is None) == bool(found)
    assert all(e.file == str(path) for e in found)
    return [(e.key, e.bare_message, e.hint) for e in found]


def one(tmp_path: Path, toml: str, **kw: str) -> tuple[str | None, str, str | None]:
    found = errors(tmp_path, toml, **kw)
    assert len(found) == 1, found
    return found[0]


def test_the_base_is_valid(tmp_path: Path) -> None:
    assert errors(tmp_path, BASE) == []


# -- unknown keys ------------------------------------------------------------------------

@pytest.mark.parametrize(("old", "new", "key", "name", "hint"), [
    ("replication = 4", "replicaton = 4", "modules.server.replicaton", "replicaton",
     "did you mean 'replication'?"),
    ('source = "client.py"', 'source = "client.py"\nentrypont = "main"',
     "modules.client.entrypont", "entrypont", "did you mean 'entrypoint'?"),
    ('priority = "len(query)"', 'priorty = "len(query)"', "modules.server.define.compare.priorty",
     "priorty", "did you mean 'priority'?"),
    ('callstyle = "async-demand(5)"', 'calstyle = "async"', "modules.client.use.compare.calstyle",
     "calstyle", "did you mean 'callstyle'?"),
    ("[bind]", "[clustr]\n[bind]", "clustr", "clustr", "did you mean 'cluster'?"),
    ("[bind]", "[cluster]\nheartbeet = 1\n[bind]", "cluster.heartbeet", "heartbeet",
     "did you mean 'heartbeat'?"),
])
def test_unknown_key_suggests_the_nearest(tmp_path: Path, old: str, new: str, key: str,
                                          name: str, hint: str) -> None:
    assert one(tmp_path, BASE.replace(old, new, 1)) == (key, f"unknown key {name!r}", hint)
    assert one(tmp_path, BASE.replace(old, new, 1))[1:] == (f"unknown key {name!r}", hint)


def test_unknown_key_without_a_near_one_lists_the_valid_ones(tmp_path: Path) -> None:
    assert one(tmp_path, BASE + "[cluster]\nzzz = 1\n") == (
        "cluster.zzz", "unknown key 'zzz'",
        "valid keys: engine, registry, listen_host, heartbeat, max_frame, token_file, tls")


# Every serving-side key misplaced in a use table gets the same pointer, not only priority.
@pytest.mark.parametrize(("key", "value"), [("priority", '"len(query)"'), ("cache", '["query"]')])
def test_a_serving_side_key_in_use_points_to_define(tmp_path: Path, key: str, value: str) -> None:
    toml = BASE.replace('callstyle = "async-demand(5)"', f"{key} = {value}")
    assert one(tmp_path, toml) == (
        f"modules.client.use.compare.{key}", f"unknown key {key!r}",
        f"{key} belongs to the serving side: define.<iface>.{key} of the module the "
        "interface is bound to")


def test_callstyle_in_define_points_to_use(tmp_path: Path) -> None:
    toml = BASE.replace('priority = "len(query)"', 'callstyle = "async"')
    assert one(tmp_path, toml) == (
        "modules.server.define.compare.callstyle", "unknown key 'callstyle'",
        "callstyle belongs to the calling side: use.<iface>.callstyle of the client module")


# -- wrong types and values --------------------------------------------------------------

INPROC_HINT = ("inproc:// is for a listener and its connections within one process, in "
               "tests; replicas run as processes of their own: 'ipc' or 'shm' for this host")


def set_server(key_line: str) -> str:
    return BASE.replace('replication = 4\n', f"replication = 4\n{key_line}\n", 1)


def set_define(item: str) -> str:
    return BASE.replace('{ priority = "len(query)" }', f'{{ priority = "len(query)", {item} }}')


AGG = "expected a number of calls from 1 to 1,000,000 or a size such as '64KiB' (0 or '0B': off), got "


def set_use(item: str) -> str:
    return BASE.replace('{ callstyle = "async-demand(5)" }', f"{{ {item} }}")


FRAME = ("at least '64KiB': polybus's own messages must fit in a frame too (a call's "
         "header, a remote error's traceback, a batch of answers)")


def set_cluster(item: str) -> str:
    return BASE + f"\n[cluster]\n{item}\n"


@pytest.mark.parametrize(("toml", "key", "message", "hint"), [
    (BASE.replace('source = "server.py"', "source = 5"), "modules.server.source",
     "expected a string, got an integer 5", None),
    (set_server('pickle = "yes"'), "modules.server.pickle",
     "expected true or false, got a string 'yes'", None),
    (set_server('transport = "udp"'), "modules.server.transport",
     "expected one of 'tcp', 'ipc', 'shm', got 'udp'", None),
    (set_server("transport = 1"), "modules.server.transport",
     "expected one of 'tcp', 'ipc', 'shm', got an integer 1", None),
    (set_server("args = 5"), "modules.server.args", "expected an array, got an integer 5",
     "args is the list of the entrypoint's arguments, even of one: args = [5]"),
    (set_server("kwargs = [1]"), "modules.server.kwargs",
     "expected a table, got an array [1]", None),
    (set_server("entrypoint = 3").replace('entrypoint = "main"', ""),
     "modules.server.entrypoint", "expected a string, got an integer 3", None),
    (set_define("pool = 0"), "modules.server.define.compare.pool",
     "expected a pool size, got 0",
     "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"),
    (set_define('pool = "processes:0"'), "modules.server.define.compare.pool",
     "expected a pool size, got 'processes:0'",
     "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"),
    (set_define("pool = true"), "modules.server.define.compare.pool",
     "expected a pool size, got True",
     "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"),
    (set_define('queue = "big"'), "modules.server.define.compare.queue",
     "expected an integer >= 1, got a string 'big'", None),
    (set_define("queue = 0"), "modules.server.define.compare.queue",
     "expected an integer >= 1, got 0", None),
    (set_define('overflow = "drop"'), "modules.server.define.compare.overflow",
     "expected one of 'block', 'reject', got 'drop'", None),
    (set_define("cache = 5"), "modules.server.define.compare.cache",
     "expected 'auto' or an array of parameter names, got an integer 5", None),
    (set_define("cache = [1]"), "modules.server.define.compare.cache",
     "expected 'auto' or an array of parameter names, got an array [1]", None),
    (set_define('cache_bytes = "lots"'), "modules.server.define.compare.cache_bytes",
     "not a size: 'lots'", "a number of bytes or a string such as '64KiB', '512MiB', '1GB'"),
    (set_define('prefetch = "some"'), "modules.server.define.compare.prefetch",
     "expected one of 'all', got 'some'", None),
    (set_define("timeout = 0"), "modules.server.define.compare.timeout",
     "expected a duration > 0, got 0", None),
    (set_define('timeout = "-1s"'), "modules.server.define.compare.timeout",
     "a duration must not be negative, got '-1s'",
     "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"),
    (set_define('idempotent = "no"'), "modules.server.define.compare.idempotent",
     "expected true or false, got a string 'no'", None),
    (BASE.replace('priority = "len(query)"', "priority = 5"),
     "modules.server.define.compare.priority", "expected an expression string, got an integer 5",
     "the priority is a Python expression over the call's parameters; "
     'write it quoted: priority = "5"'),
    (set_use('callstyle = "fast"'), "modules.client.use.compare.callstyle",
     "unknown call style 'fast'",
     "one of 'sync', 'async', 'async-demand(N)' with N >= 1, 'async-demand(auto)'"),
    (set_use("callstyle = 5"), "modules.client.use.compare.callstyle",
     "expected a call style string, got 5",
     "one of 'sync', 'async', 'async-demand(N)' with N >= 1, 'async-demand(auto)'"),
    (set_use('balance = "random"'), "modules.client.use.compare.balance",
     "expected one of 'none', 'steal', 'least', got 'random'", None),
    # (a count or a size: both forms are said, whichever was written)
    (set_use("aggregate = -5"), "modules.client.use.compare.aggregate",
     AGG + "-5", None),
    (set_use("aggregate = true"), "modules.client.use.compare.aggregate",
     AGG + "a boolean True",
     None),
    (set_use('aggregate = "many"'), "modules.client.use.compare.aggregate",
     "not a size: 'many'", "a number of bytes or a string such as '64KiB', '512MiB', '1GB'"),
    (set_use('linger = "soon"'), "modules.client.use.compare.linger",
     "not a duration: 'soon'",
     "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"),
    (set_use("timeout = false"), "modules.client.use.compare.timeout",
     "expected a duration, got False",
     "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"),
    (set_use('transport = "carrier-pigeon"'), "modules.client.use.compare.transport",
     "expected one of 'tcp', 'ipc', 'shm', got 'carrier-pigeon'", None),
    # inproc:// is an address for tests within one process; replicas are processes
    (set_server('transport = "inproc"'), "modules.server.transport",
     "expected one of 'tcp', 'ipc', 'shm', got 'inproc'", INPROC_HINT),
    (set_use('transport = "inproc"'), "modules.client.use.compare.transport",
     "expected one of 'tcp', 'ipc', 'shm', got 'inproc'", INPROC_HINT),
    (set_use('loadratio = "1:x:1:1"'), "modules.client.use.compare.loadratio",
     "not a load ratio: '1:x:1:1'",
     "a string such as '1:2:4' or an array of numbers such as [1, 2, 4]"),
    (set_use('loadratio = [1, "a", 1, 1]'), "modules.client.use.compare.loadratio",
     "expected a string such as '1:2:4' or an array of numbers such as [1, 2, 4], "
     "got an array [1, 'a', 1, 1]", None),
    (set_use("loadratio = [0, 0, 0, 0]"), "modules.client.use.compare.loadratio",
     "a load ratio needs shares >= 0, at least one > 0; got [0, 0, 0, 0]",
     "a string such as '1:2:4' or an array of numbers such as [1, 2, 4]"),
    (set_use('loadratio = "1:-1:1:1"'), "modules.client.use.compare.loadratio",
     "a load ratio needs shares >= 0, at least one > 0; got '1:-1:1:1'",
     "a string such as '1:2:4' or an array of numbers such as [1, 2, 4]"),
    (set_server('spin = "soon"'), "modules.server.spin", "not a duration: 'soon'",
     "a number of seconds or a string such as '250us', '1ms', '5s', '2m'"),
    (set_server('spin = "1s"'), "modules.server.spin",
     "a spin of '1s' (1 s) would burn a CPU for nothing", "at most '10ms'; '0' to block at once"),
    (set_server('coalesce = "0.5us"'), "modules.server.coalesce",  # (quoted as written)
     "a coalesce of '0.5us' (5e-07 s) is less than the 1 us it is counted in",
     "'0' for none, or at least '1us'"),
    (set_cluster('engine = "k8s"'), "cluster.engine",
     "expected one of 'local', 'hosts', 'mpi', 'ray', got 'k8s'", None),
    (set_cluster('registry = "localhost"'), "cluster.registry",
     "bad registry address 'localhost'",
     "expected HOST:PORT with 1 <= PORT <= 65535, e.g. '10.0.0.5:7700'"),
    (set_cluster('registry = "h:70000"'), "cluster.registry", "bad registry address 'h:70000'",
     "expected HOST:PORT with 1 <= PORT <= 65535, e.g. '10.0.0.5:7700'"),
    (set_cluster("heartbeat = 0"), "cluster.heartbeat",
     "expected a duration > 0 and at most '24h', got 0", None),
    (set_cluster('max_frame = "0B"'), "cluster.max_frame",
     "a max_frame of '0B' is below the least polybus takes, '64KiB' (65,536 bytes)", FRAME),
    (set_cluster("max_frame = 10"), "cluster.max_frame",
     "a max_frame of 10 is below the least polybus takes, '64KiB' (65,536 bytes)", FRAME),
    (set_cluster('max_frame = "65535B"'), "cluster.max_frame",
     "a max_frame of '65535B' is below the least polybus takes, '64KiB' (65,536 bytes)",
     FRAME),
    (set_cluster("listen_host = 127"), "cluster.listen_host",
     "expected a string, got an integer 127", None),
    (set_cluster("token_file = false"), "cluster.token_file",
     "expected a string, got a boolean False", None),
])
def test_wrong_types_and_values(tmp_path: Path, toml: str, key: str, message: str,
                                hint: str | None) -> None:
    found = errors(tmp_path, toml)
    assert (key, message, hint) in found
    assert len(found) == 1 or all(k != key for k, _, _ in found[1:]), found


def test_registry_forms(tmp_path: Path) -> None:
    for good in ("10.0.0.5:7700", "node-1.cluster:1", "[::1]:65535"):
        assert errors(tmp_path, set_cluster(f'registry = "{good}"')) == []


@pytest.mark.parametrize(("toml", "key", "message"), [
    ("modules = 5\n", "modules", "expected a table, got an integer 5"),
    ("bind = 5\ncluster = 5\n" + BASE.replace("[bind]", "").replace(
        '"client.compare" = "server.compare"', ""), "bind", "expected a table, got an integer 5"),
    ("cluster = 5\n" + BASE, "cluster", "expected a table, got an integer 5"),
    (BASE.replace("[modules.server]\n", "[modules]\nother = 5\n[modules.server]\n"),
     "modules.other", "expected a table, got an integer 5"),
    (BASE.replace("define.compare = { priority = \"len(query)\" }", "define = 5"),
     "modules.server.define", "expected a table, got an integer 5"),
    (BASE.replace("define.compare = { priority = \"len(query)\" }", "define.compare = 5"),
     "modules.server.define.compare", "expected a table of define options, got an integer 5"),
    (BASE.replace('use.compare = { callstyle = "async-demand(5)" }', 'use.compare = "sync"'),
     "modules.client.use.compare", "expected a table of use options, got a string 'sync'"),
])
def test_wrong_table_types(tmp_path: Path, toml: str, key: str, message: str) -> None:
    assert (key, message, None) in errors(tmp_path, toml)


def test_missing_modules_table(tmp_path: Path) -> None:
    assert one(tmp_path, "[cluster]\n") == ("modules", "missing table [modules]",
                                            "e.g. [modules.server] with a source")


NOT_OURS = "is not a key of polybus: "
REPLICAS_HERE = "the processes that serve a module are its replicas: replication = 2"


# Another framework's name for a module's processes or a replica's threads: the hint said
# only "valid keys: source, replication, ..." (replicas was "did you mean 'replication'?").
@pytest.mark.parametrize("name", ["workers", "n_workers", "num_workers", "replicas",
                                  "processes"])
def test_a_foreign_name_for_the_processes_points_to_replication(tmp_path: Path,
                                                                name: str) -> None:
    assert one(tmp_path, set_server(f"{name} = 2")) == (
        f"modules.server.{name}", f"unknown key {name!r}", f"{name!r} {NOT_OURS}{REPLICAS_HERE}")


@pytest.mark.parametrize(("toml", "key", "hint"), [
    (set_server("threads = 4"), "modules.server.threads",
     "the threads that run an interface's calls on a replica are its pool: "
     "modules.server.define.<iface>.pool = 4"),
    (set_define("threads = 4"), "modules.server.define.compare.threads",
     "the threads that run this interface's calls are its pool: pool = 4"),
    (set_define("processes = 4"), "modules.server.define.compare.processes",
     'the child processes that run this interface\'s calls are its pool: pool = "processes:4"'),
    (set_define("workers = 3"), "modules.server.define.compare.workers",
     "the processes that serve a module are its replicas, a key of the module: "
     "modules.server.replication = 3"),
    (set_cluster("n_workers = 3"), "cluster.n_workers",
     "the processes that serve a module are its replicas, a key of the module: "
     "modules.<key>.replication = 3"),
    (BASE.replace('callstyle = "async-demand(5)"', "threads = 2"),
     "modules.client.use.compare.threads",
     "the threads that run an interface's calls on a replica are its pool: "
     "define.<iface>.pool of the module the interface is bound to"),
])
def test_a_foreign_name_is_told_where_it_goes_in_each_table(tmp_path: Path, toml: str,
                                                            key: str, hint: str) -> None:
    name = key.rpartition(".")[2]
    assert one(tmp_path, toml) == (key, f"unknown key {name!r}", f"{name!r} {NOT_OURS}{hint}")


# Names of Ray, Dask and concurrent.futures a ported program's configuration reaches for:
# the hint listed the table's keys alone ("valid keys: source, replication, ...").
USE = 'callstyle = "async-demand(5)"'
RUN_AGAIN = ("a call lost with its replica runs again on another, as long as its "
             "interface is idempotent (the default; idempotent = false stops it); an "
             "exception the function raises is not run again")


@pytest.mark.parametrize(("toml", "key", "hint"), [
    (set_server("max_workers = 2"), "modules.server.max_workers", REPLICAS_HERE),
    (set_server("num_cpus = 2"), "modules.server.num_cpus", REPLICAS_HERE),
    (set_define("max_concurrency = 4"), "modules.server.define.compare.max_concurrency",
     "the threads that run this interface's calls are its pool: pool = 4"),
    (set_define("max_retries = 3"), "modules.server.define.compare.max_retries", RUN_AGAIN),
    (BASE.replace(USE, "chunksize = 100"), "modules.client.use.compare.chunksize",
     "calls to one replica travel together, up to N a message, with aggregate: "
     "aggregate = 100"),
    (set_define("chunksize = 100"), "modules.server.define.compare.chunksize",
     "calls to one replica travel together, up to N a message, with aggregate, a key of "
     "the client's use table: modules.<client>.use.<name>.aggregate = 100"),
    (set_server("num_gpus = 1"), "modules.server.num_gpus",
     "nothing is placed by resources: a replica runs where its engine puts it, or where "
     "its worker is started by hand at a registry (docs/coming-from.md, 'num_gpus')"),
])
def test_a_ported_programs_name_is_told_where_it_goes(tmp_path: Path, toml: str, key: str,
                                                       hint: str) -> None:
    name = key.rpartition(".")[2]
    assert one(tmp_path, toml) == (key, f"unknown key {name!r}", f"{name!r} {NOT_OURS}{hint}")
