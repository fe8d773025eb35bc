"""Loading whole configuration files: the DESIGN.md example, every key, many mistakes at once."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus.config as config
from polybus.config import ConfigErrors, load, validate
from polybus.config.model import (
    AppConfig,
    Binding,
    CallStyle,
    ClusterSpec,
    Condition,
    DefineSpec,
    MigrationPath,
    ModuleSpec,
    ReplicaSpec,
    UseSpec,
)
from polybus.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "config"


def test_design_example_loads_to_the_expected_config() -> None:
    here = FIXTURES / "design"
    cfg = load(here / "app.toml")
    assert cfg == AppConfig(
        path=(here / "app.toml").resolve(),
        modules={
            "server": ModuleSpec(
                key="server",
                source=(here / "server.py").resolve(),
                replication=tuple(ReplicaSpec(f"server-{i}") for i in range(4)),
                define={"compare": DefineSpec(priority="len(query)")},
            ),
            "client": ModuleSpec(
                key="client",
                source=(here / "client.py").resolve(),
                use={"compare": UseSpec(callstyle=CallStyle("async-demand", 5))},
                entrypoint="main",
                args=(["ACGT", "GATTACA"], "ACGTTGCA"),
            ),
        },
        bindings=(Binding("client", "compare", "server", "compare"),),
        client="client",
        cluster=ClusterSpec(),
    )
    assert list(cfg.modules) == ["server", "client"]
    assert cfg.binding("client", "compare") == Binding("client", "compare", "server", "compare")
    assert [m.key for m in cfg.servers()] == ["server"]


def test_design_example_with_a_string_path() -> None:
    path = str(FIXTURES / "design" / "app.toml")
    cfg, errors = validate(path)
    assert errors == [] and cfg is not None
    assert cfg.client == "client"


def test_every_key() -> None:
    here = FIXTURES / "full"
    cfg = load(here / "app.toml")
    assert cfg.cluster == ClusterSpec(engine="local", registry="127.0.0.1:7700",
                                      listen_host="0.0.0.0", heartbeat=0.25,
                                      max_frame=64 << 20,
                                      token_file=str((here / "secrets" / "token").resolve()))
    align = cfg.modules["align"]
    assert align.replication == (
        ReplicaSpec("a", 0.5, overload=Condition(">=", 10)),
        ReplicaSpec("b", underload=Condition("==", 0)),
        ReplicaSpec("c"),
    )
    assert align.migration == (MigrationPath("a", "b", 0.25), MigrationPath("b", "c", 0.25))
    assert align.transport == "shm" and align.pickle is True
    compare = align.define["compare"]
    assert compare == DefineSpec(priority=compare.priority, pool=4, pool_kind="processes",
                                 queue=64, overflow="reject", cache=("entry",),
                                 cache_bytes=16 << 20, cache_bytes_set=True, prefetch="all", timeout=2.0,
                                 idempotent=False)
    assert config.compile_priority(compare.priority or "", ["query", "entry", "gap"])(
        {"query": "abc", "gap": 2}) == 5.0
    assert align.define["lookup"] == DefineSpec(pool=2, cache="auto")

    stats = cfg.modules["stats"]
    assert [r.name for r in stats.replication] == ["stats-0", "stats-1"]
    # no define table: every public top-level function is an interface, with defaults
    assert stats.define == {"mean": DefineSpec(), "median": DefineSpec()}

    driver = cfg.modules["driver"]
    assert cfg.client == "driver" and driver.entrypoint == "run"
    assert driver.replication == () and driver.define == {}
    assert driver.args == (["ACGT", "GATTACA"], "ACGTTGCA")
    assert driver.kwargs == {"repeat": 3}
    assert driver.use["compare"] == UseSpec(callstyle=CallStyle("async"),
                                            loadratio=(1.0, 2.0, 4.0), balance="steal",
                                            aggregate=16, linger=0.005, timeout=30.0,
                                            transport="ipc")
    assert driver.use["mean"] == UseSpec(callstyle=CallStyle("async-demand", None),
                                         loadratio=(1.0, 3.0), aggregate_bytes=64 * 1024)
    assert cfg.bindings == (Binding("driver", "compare", "align", "compare"),
                            Binding("driver", "mean", "stats", "mean"))
    assert [m.key for m in cfg.servers()] == ["align", "stats"]


def test_hosts_engine_places_named_replicas_on_their_hosts(tmp_path: Path) -> None:
    for name in ("server.py", "client.py"):
        (tmp_path / name).write_text((FIXTURES / "design" / name).read_text())
    (tmp_path / "app.toml").write_text(
        (FIXTURES / "design" / "app.toml").read_text()
        .replace("replication = 4", 'replication = "harvey,bugs"')
        + '\n[cluster]\nengine = "hosts"\n')
    cfg = load(tmp_path / "app.toml")
    assert [(r.name, r.host) for r in cfg.modules["server"].replication] == [
        ("harvey", "harvey"), ("bugs", "bugs")]


def test_many_mistakes_are_reported_together() -> None:
    path = str(FIXTURES / "broken" / "app.toml")
    cfg, errors = validate(path)
    assert cfg is None
    found = {(e.key, e.bare_message, e.hint) for e in errors}
    assert found == {
        ("modules.server.replicaton", "unknown key 'replicaton'", "did you mean 'replication'?"),
        ("modules.server.define.compare.pool", "expected a pool size, got 'gpus:2'",
         "an integer from 1 to 4096, or 'threads:N' / 'processes:N' with N from 1 to 4096"),
        ("modules.server.define.compare.priority",
         "priority 'len(qeury)': line 1, column 5: name 'qeury' is not a parameter of the "
         "interface", "did you mean 'query'?"),
        ("modules.client.entrypoint",
         "entrypoint 'mian' is not a top-level function of client.py", "did you mean 'main'?"),
        ("modules.client.use.compare.callstyle",
         "bad window '0' in call style 'async-demand(0)': expected an integer >= 1 or 'auto'",
         "one of 'sync', 'async', 'async-demand(N)' with N >= 1, 'async-demand(auto)'"),
        ('bind."client.compare"', "binding target module 'sever' does not exist",
         "did you mean 'server'?"),
        ("modules.client.use.lookup", "unbound interface 'lookup'",
         'add to [bind]: "client.lookup" = "<module>.<interface>"'),
    }
    assert all(e.file == path for e in errors)

    with pytest.raises(ConfigError) as info:
        load(path)
    err = info.value
    assert isinstance(err, ConfigErrors)
    assert [str(e) for e in err.errors] == [str(e) for e in errors]
    lines = str(err).splitlines()
    assert lines[0] == f"{path}: 7 configuration errors:"
    assert lines[1:] == [f"  {e}" for e in errors]
    # each at the line that wrote its key (or the table it is missing from)
    assert f"  {path}:4: modules.server.replicaton: unknown key 'replicaton' (did you mean " \
           "'replication'?)" in lines
    text = Path(path).read_text().splitlines()
    for e in errors:
        assert e.line is not None, e
        last = e.key.replace('"', "").split(".")[-1]
        assert last in text[e.line - 1] or text[e.line - 1].startswith("["), (e, e.line)


def test_a_single_mistake_is_raised_as_itself(tmp_path: Path) -> None:
    (tmp_path / "app.toml").write_text("[modules]\n")
    with pytest.raises(ConfigErrors) as info:
        load(tmp_path / "app.toml")
    err = info.value
    assert len(err.errors) == 1
    assert err.bare_message == "no modules"
    assert (err.file, err.key, err.line) == (str(tmp_path / "app.toml"), "modules", 1)
    assert str(err) == str(err.errors[0]) == f"{tmp_path / 'app.toml'}:1: modules: no modules " \
        "(add [modules.<name>] tables, each with a source)"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    cfg, errors = validate(path)
    assert cfg is None
    assert [(e.file, e.key, e.bare_message) for e in errors] == [
        (str(path), None, "configuration file not found")]


def test_not_toml(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[modules.server\nsource = 1\n")
    _, errors = validate(path)
    assert len(errors) == 1 and errors[0].bare_message.startswith("not valid TOML: ")
    assert errors[0].file == str(path)


def test_overrides_are_applied_before_validation() -> None:
    path = FIXTURES / "design" / "app.toml"
    cfg = load(path, ["modules.server.replication=8",
                      "modules.client.use.compare.callstyle=async-demand(auto)",
                      'modules.server.define.compare.priority="-len(entry)"',
                      "cluster.heartbeat=5s"])
    assert len(cfg.modules["server"].replication) == 8
    assert cfg.modules["client"].use["compare"].callstyle == CallStyle("async-demand", None)
    assert cfg.modules["server"].define["compare"].priority == "-len(entry)"
    assert cfg.cluster.heartbeat == 5.0


def test_overrides_as_a_mapping() -> None:
    cfg = load(FIXTURES / "design" / "app.toml",
               {"modules.server.replication": "a#b:[0.5]", "modules.client.args": [[], "x"]})
    assert [r.name for r in cfg.modules["server"].replication] == ["a", "b"]
    assert cfg.modules["server"].migration == (MigrationPath("a", "b", 0.5),)
    assert cfg.modules["client"].args == ([], "x")


def test_bind_override_replaces_the_quoted_binding(tmp_path: Path) -> None:
    for name in ("server.py", "client.py"):
        (tmp_path / name).write_text((FIXTURES / "design" / name).read_text())
    (tmp_path / "app.toml").write_text(
        (FIXTURES / "design" / "app.toml").read_text()
        + '\n[modules.other]\nsource = "server.py"\n')
    cfg = load(tmp_path / "app.toml", ["bind.client.compare=other.compare"])
    assert cfg.bindings == (Binding("client", "compare", "other", "compare"),)


def test_mistakes_in_overridden_keys_are_reported_against_set() -> None:
    path = str(FIXTURES / "design" / "app.toml")
    _, errors = validate(path, ["modules.server.replication=-1", "modules.server.pool=2",
                                "modules.client.use.compare.loadratio=1:1"])
    # the load ratio cannot be checked against a replica count that is itself wrong
    assert [(e.file, e.key, e.bare_message) for e in errors] == [
        ("--set", "modules.server.pool", "unknown key 'pool'"),
        ("--set", "modules.server.replication", "the replica count must be at least 0, got -1"),
    ]


def test_bad_override_paths() -> None:
    path = FIXTURES / "design" / "app.toml"
    _, errors = validate(path, ["modules.srever.replication=2", "modules.server.source.x=1",
                                "no-equals-sign", "modules..x=1"])
    assert [(e.file, e.key, e.bare_message, e.hint) for e in errors] == [
        ("--set", "no-equals-sign", "expected KEY=VALUE, got 'no-equals-sign'",
         "e.g. --set modules.server.replication=8"),
        ("--set", "modules..x", "bad key path 'modules..x'",
         "a dotted key such as modules.server.replication"),
        ("--set", "modules.srever.replication", "no module 'srever' to override",
         "did you mean 'server'?"),
        ("--set", "modules.server.source.x",
         "cannot set modules.server.source.x: modules.server.source is not a table", None),
    ]


def test_a_folder_given_as_the_configuration_names_the_files_it_holds(tmp_path: Path) -> None:
    """`polybus run examples/dna`: it was "cannot read the configuration file: [Errno 21]
    Is a directory"."""
    (tmp_path / "app.cfg").write_text("")
    (tmp_path / "pipeline.toml").write_text("")
    (tmp_path / "app.toml").write_text("")
    (tmp_path / "server.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("")  # (a Python project's, not one)
    _, errors = validate(tmp_path)
    assert [(e.file, e.bare_message, e.hint) for e in errors] == [(
        str(tmp_path), "a folder, not a configuration file",
        f"give the configuration in it: {tmp_path / 'app.toml'}, "
        f"{tmp_path / 'pipeline.toml'} or {tmp_path / 'app.cfg'}")]
    empty = tmp_path / "empty"
    empty.mkdir()
    _, errors = validate(empty)
    assert [e.hint for e in errors] == [
        "it holds no configuration (a .toml file, or MIL's .cfg or .mil)"]


@pytest.mark.parametrize("written", ["app", "app.tml", "App.toml", "ap.toml"])
def test_a_configuration_not_found_names_the_one_it_is_likely_a_typo_of(
        tmp_path: Path, written: str) -> None:
    (tmp_path / "app.toml").write_text("")
    (tmp_path / "app.py").write_text("")
    _, errors = validate(tmp_path / written)
    assert [(e.bare_message, e.hint) for e in errors] == [
        ("configuration file not found", f"did you mean {str(tmp_path / 'app.toml')!r}?")]
