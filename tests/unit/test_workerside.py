"""What a replica applies itself, as it registers it, and a run's comparison of it with
its own configuration (config/workerside.py, client/handsettings.py), without processes."""

from __future__ import annotations

import warnings
from pathlib import Path

import msgspec
import pytest

from polybus.client.handsettings import say_other_settings
from polybus.config import load
from polybus.config.model import AppConfig
from polybus.config.origin import SET
from polybus.config.workerside import Differs, applied, differences, setting_key
from polybus.errors import ConfigWarning
from polybus.wire.messages import Replica

FILE = ('[modules.s]\nsource = "s.py"\nreplication = 2\n'
        'define.f = { pool = 2 }\n'
        '[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
        '[bind]\n"c.f" = "s.f"\n')


@pytest.fixture
def app_path(tmp_path: Path) -> Path:
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n\n\ndef g(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    path = tmp_path / "app.toml"
    path.write_text(FILE)
    return path


def _app(path: Path, *sets: str) -> AppConfig:
    return load(path, sets, SET)


def test_a_replica_of_no_configuration_applies_the_defaults() -> None:
    assert applied(None, "anyone", ["f", "g"]) == {
        "define.f.pool": "1", "define.g.pool": "1", "queue": "1000", "overflow": "block",
        "cache_bytes": "512MiB", "pickle": "false", "priority": "ordered", "spin": "100 us",
        "cpus": "[]", "speed": "1.0"}


def test_a_replica_applies_its_configuration_by_its_name(app_path: Path) -> None:
    app = _app(app_path, 'modules.s.define.f={pool="processes:3", queue=5}',
               'modules.s.define.g={overflow="reject", cache_bytes=1000}',
               'modules.s.replication="s-0:speed=0.25,s-1"', "modules.s.cpus=[[0],[1, 2]]",
               "modules.s.pickle=true")
    spec = app.modules["s"]
    s0, s1, other = (applied(spec, n) for n in ("s-0", "s-1", "x"))
    assert s0 == {"define.f.pool": "processes:3", "define.g.pool": "1",
                  "define.f.idempotent": "true", "queue": "1000",
                  "overflow": "reject", "cache_bytes": "1000B", "pickle": "true",
                  "priority": "ordered", "spin": "100 us", "cpus": "0",
                  "speed": "0.25"}
    assert (s1["cpus"], s1["speed"]) == ("1-2", "1.0")
    # a name replication does not give: every CPU listed, full speed (worker/main.py)
    assert (other["cpus"], other["speed"]) == ("0-2", "1.0")
    assert applied(app.modules["s"], "s-0") == s0  # (the same text each time)


def test_replicas_that_agree_differ_in_nothing(app_path: Path) -> None:
    spec = _app(app_path).modules["s"]
    assert differences(spec, [(n, applied(spec, n)) for n in ("s-0", "s-1")]) == []


def test_a_difference_names_the_replicas_their_value_and_the_runs(app_path: Path) -> None:
    theirs = _app(app_path, "modules.s.define.f.pool=2").modules["s"]
    ours = _app(app_path, "modules.s.define.f.pool=4").modules["s"]
    [d] = differences(ours, [(n, applied(theirs, n)) for n in ("s-0", "s-1")])
    assert d.key == "define.f.pool"
    assert d.text() == "s-0, s-1 have 2 where this run's configuration gives 4"


def test_speed_and_cpus_are_compared_by_the_replicas_name(app_path: Path) -> None:
    theirs = _app(app_path, 'modules.s.replication="s-0:speed=0.5,s-1"',
                  "modules.s.cpus=[[0],[1]]").modules["s"]
    ours = _app(app_path, 'modules.s.replication="s-0,s-1:speed=0.5"',
                "modules.s.cpus=[[1],[0]]").modules["s"]
    found = {d.key: d.text() for d in
             differences(ours, [(n, applied(theirs, n)) for n in ("s-0", "s-1")])}
    assert found == {
        "cpus": "s-0 has 0 where this run's configuration gives 1; "
                "s-1 has 1 where this run's configuration gives 0",
        "speed": "s-0 has 0.5 where this run's configuration gives 1.0; "
                 "s-1 has 1.0 where this run's configuration gives 0.5"}
    # the same settings under the names they were given: nothing differs
    assert differences(theirs, [(n, applied(theirs, n)) for n in ("s-0", "s-1")]) == []


def test_a_replica_that_registers_no_settings_is_not_compared(app_path: Path) -> None:
    """An older worker's record (no ``settings`` field) still decodes, and says none."""
    old = msgspec.msgpack.encode(["s-0", "s", "tcp://127.0.0.1:1", ["f"], 1.0, 7, [], ""])
    replica = msgspec.msgpack.decode(old, type=Replica)
    assert replica.settings == {}
    spec = _app(app_path, "modules.s.define.f.pool=4").modules["s"]
    assert differences(spec, [(replica.name, replica.settings)]) == []
    # nor a key a replica does not register (an interface it does not know)
    assert differences(spec, [("s-0", {"speed": "1.0"})]) == []
    new = Replica("s-1", "s", "tcp://127.0.0.1:1", ["f"], settings={"speed": "0.5"})
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(new), type=Replica) == new


def test_the_key_said_is_the_one_that_gives_the_runs_value(app_path: Path) -> None:
    spec = _app(app_path, "modules.s.define.g.queue=5000",
                'modules.s.define.g.overflow="reject"').modules["s"]
    assert setting_key(spec, "define.f.pool") == "modules.s.define.f.pool"
    assert setting_key(spec, "queue") == "modules.s.define.g.queue"
    assert setting_key(spec, "overflow") == "modules.s.define.g.overflow"
    assert setting_key(spec, "speed") == "modules.s.replication"
    assert setting_key(spec, "cpus") == "modules.s.cpus"
    assert setting_key(spec, "pickle") == "modules.s.pickle"


def _said(app: AppConfig, settings: dict[str, str], said: set[str] | None = None
          ) -> list[str]:
    replicas = [(Replica(n, "s", "tcp://127.0.0.1:1", ["f"], settings=settings), None)
                for n in ("s-0", "s-1")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        say_other_settings(app, "s", replicas, set() if said is None else said)
    assert all(issubclass(w.category, ConfigWarning) for w in caught)
    return [str(w.message) for w in caught]


def test_a_warning_says_where_the_runs_value_came_from(app_path: Path) -> None:
    workers = applied(_app(app_path, "modules.s.define.f.pool=3",
                           "modules.s.define.f.queue=5").modules["s"], "s-0")
    # from the file's line, from --set, and the default (no define wrote a queue)
    [f_pool, queue] = _said(_app(app_path), workers)
    assert f_pool.startswith(f"{app_path}:4: modules.s.define.f.pool: the replicas started "
                             "by hand apply their own define.f.pool: s-0, s-1 have 3 where "
                             "this run's configuration gives 2 (start the workers with "
                             "the same --set")
    assert queue.startswith(f"{app_path}: modules.s.define.f.queue: ") and \
        "apply their own queue: s-0, s-1 have 5 where this run's configuration gives " \
        "1000 (the default)" in queue, queue
    [f_pool, _] = _said(_app(app_path, "modules.s.define.f.pool=4"), workers)
    assert f_pool.startswith("--set: modules.s.define.f.pool: ") and "gives 4" in f_pool
    # none where they agree, whoever gave this run its value (the --set the workers had)
    assert _said(_app(app_path, "modules.s.define.f.pool=3",
                      "modules.s.define.f.queue=5"), workers) == []


def test_each_key_is_said_once_a_session(app_path: Path) -> None:
    workers = applied(_app(app_path, "modules.s.define.f.pool=3").modules["s"], "s-0")
    said: set[str] = set()
    assert len(_said(_app(app_path), workers, said)) == 1
    assert _said(_app(app_path), workers, said) == []  # (another binding's, say)


def test_cpus_per_replica_are_not_compared_for_a_replica_the_run_does_not_name(
        app_path: Path) -> None:
    """A run that takes fewer replicas than the workers' file names (``--set
    replication=1``, a sweep over the count) uses the one its turn gives: s-1, pinned
    by the workers' file to its own list. This run's configuration gives s-1 no list
    of its own (only its replicas have one): it was said to give "0-1", every CPU
    listed, which none of its replicas is on."""
    theirs = _app(app_path, "modules.s.cpus=[[0],[1]]").modules["s"]
    ours = _app(app_path, "modules.s.cpus=[[0],[1]]", "modules.s.replication=1").modules["s"]
    assert differences(ours, [("s-1", applied(theirs, "s-1"))]) == []
    # one on a list of the run's is as the run places its replicas; one on none is not
    assert differences(ours, [("x", {"cpus": "0"})]) == []
    [d] = differences(ours, [("x", {"cpus": "[]"}), ("y", {"cpus": "0-1"})])
    assert d.text() == "x has [] where this run's configuration gives 0-1", d.text()
    # a replica the run names is compared with its own list, as ever
    [d] = differences(ours, [("s-0", applied(theirs, "s-1"))])
    assert d.text() == "s-0 has 1 where this run's configuration gives 0", d.text()


def test_the_cache_bound_said_is_that_of_an_interface_that_caches(app_path: Path) -> None:
    """The bound is the largest of the interfaces that cache, when any does: g's
    ``cache_bytes``, which caches nothing, was named for it as it was equal."""
    spec = _app(app_path, 'modules.s.define={g={cache_bytes="512MiB"}, f={cache=["x"]}}'
                ).modules["s"]
    assert setting_key(spec, "cache_bytes") == "modules.s.define.f.cache_bytes"
    # none caches: the largest that one sets
    spec = _app(app_path, 'modules.s.define={g={cache_bytes="1GiB"}, f={}}').modules["s"]
    assert setting_key(spec, "cache_bytes") == "modules.s.define.g.cache_bytes"


def test_a_file_changed_since_it_was_read_is_said_without_its_line(app_path: Path) -> None:
    """The file's value, its line not to be found: it was said to be the default."""
    app = _app(app_path)
    app_path.write_text("[modules\n")  # (no longer TOML)
    [said] = _said(app, {"define.f.pool": "3"})
    assert said.startswith(f"{app_path}: modules.s.define.f.pool: ") and \
        "have 3 where this run's configuration gives 2 (start" in said, said


def test_a_replica_registers_what_the_registry_takes(app_path: Path) -> None:
    """A CPU list of thousands of CPUs may be longer than the registry takes of a
    setting (every other CPU of 8,192: 19,924 characters): the worker was refused, and
    did not start, for a setting it registers only to be compared. It is left out."""
    from dataclasses import replace

    from polybus.config.workerside import registered
    from polybus.registry.limits import replica_fault

    spec = replace(_app(app_path).modules["s"], cpus=(frozenset(range(0, 8192, 2)),))
    settings = registered(spec, "s-0")
    assert "cpus" not in settings and settings["speed"] == "1.0"
    assert replica_fault(Replica("s-0", "s", "tcp://127.0.0.1:1", ["f"],
                                 settings=settings)) is None


def test_idempotent_is_a_process_pools_own_and_compared(app_path: Path) -> None:
    """A replica runs a call of a ``processes`` pool again when the child running it
    died, unless its own configuration says the interface is not idempotent
    (worker/procpool.py): a run's ``idempotent = false`` at workers without it, for a
    call that must not run twice, was not said. Of a thread pool it is the client's."""
    theirs = _app(app_path, 'modules.s.define.f.pool="processes:2"').modules["s"]
    ours = _app(app_path, 'modules.s.define.f.pool="processes:2"',
                "modules.s.define.f.idempotent=false").modules["s"]
    [d] = differences(ours, [(n, applied(theirs, n)) for n in ("s-0", "s-1")])
    assert (d.key, d.text()) == ("define.f.idempotent", "s-0, s-1 have true where this "
                                 "run's configuration gives false")
    assert setting_key(ours, d.key) == "modules.s.define.f.idempotent"
    threads = _app(app_path, "modules.s.define.f.idempotent=false").modules["s"]
    assert differences(threads, [("s-0", applied(_app(app_path).modules["s"], "s-0"))]) == []


def test_a_replicas_spin_is_its_own_and_compared(app_path: Path) -> None:
    """A replica polls for its next call ``spin`` after answering, by its own
    configuration (none with ``coalesce`` over shm: worker/main.py `options_for`): a
    run's ``spin`` reached only its client, and was not said."""
    workers = applied(_app(app_path).modules["s"], "s-0")
    ours = _app(app_path, 'modules.s.spin="0"').modules["s"]
    [d] = differences(ours, [("s-0", workers)])
    assert (d.key, d.text()) == ("spin", "s-0 has 100 us where this run's configuration "
                                 "gives 0 s")
    assert setting_key(ours, "spin") == "modules.s.spin"
    # none with coalesce over shm, which the run's value then comes from
    shm = _app(app_path, 'modules.s.transport="shm"', 'modules.s.coalesce="10us"').modules["s"]
    assert applied(shm, "s-0")["spin"] == "0 s"
    assert setting_key(shm, "spin") == "modules.s.coalesce"


def test_a_replica_of_the_most_interfaces_registers_its_settings(app_path: Path) -> None:
    """Each interface of a pool of processes registers two settings (its pool and its
    idempotent): as many interfaces as the registry takes fit its settings' limit."""
    from dataclasses import replace

    from polybus.config.model import DefineSpec
    from polybus.config.workerside import registered
    from polybus.registry.limits import INTERFACES_MAX, replica_fault

    names = [f"f{i}" for i in range(INTERFACES_MAX)]
    spec = replace(_app(app_path).modules["s"], define={
        n: DefineSpec(pool=2, pool_kind="processes") for n in names})
    settings = registered(spec, "s-0", names)
    assert len(settings) > 2 * INTERFACES_MAX
    assert replica_fault(Replica("s-0", "s", "tcp://127.0.0.1:1", names,
                                 settings=settings)) is None


def test_a_replica_that_orders_no_calls_by_priority_is_said_to_a_run_that_has_them(
        app_path: Path) -> None:
    """A replica whose configuration gives no define a priority runs the calls in its
    ring as they come (one handler, over shm: worker/direct.py), ahead of a higher one
    behind them: a run's priorities at such workers were said to take effect. A worker
    of no configuration orders them; a run without priorities, or over TCP, is not
    compared."""
    shm, one = 'modules.s.transport="shm"', "modules.s.define.f.pool=1"
    plain = _app(app_path, shm, one).modules["s"]
    ours = _app(app_path, shm, one, 'modules.s.define.f.priority="x"').modules["s"]
    [d] = differences(ours, [("s-0", applied(plain, "s-0"))])
    assert (d.key, d.text()) == ("priority", "s-0 has as they come where this run's "
                                 "configuration gives ordered")
    assert setting_key(ours, "priority") == "modules.s.define.f.priority"
    assert differences(ours, [("s-0", applied(None, "s-0", ["f", "g"]))]) == []
    assert differences(plain, [("s-0", applied(ours, "s-0"))]) == []
    # a pool of more than one, or calls over TCP: no ring run as it comes
    two = _app(app_path, shm).modules["s"]
    assert applied(two, "s-0")["priority"] == "ordered"
    tcp = _app(app_path, one, 'modules.s.define.f.priority="x"').modules["s"]
    assert differences(tcp, [("s-0", applied(plain, "s-0"))]) == []


def test_a_run_without_priorities_is_not_told_of_a_replicas_order(app_path: Path) -> None:
    """A run whose defines give no priority sends calls of none: whether a replica
    orders them by one changes nothing. With a pool of two (its own replicas order
    their queue, `applied` "ordered") it was told that a worker of one handler runs
    them as they come."""
    shm = 'modules.s.transport="shm"'
    theirs = _app(app_path, shm, "modules.s.define.f.pool=1").modules["s"]
    ours = _app(app_path, shm).modules["s"]  # (pool 2, no priority)
    found = differences(ours, [("s-0", applied(theirs, "s-0"))])
    assert [d.key for d in found] == ["define.f.pool"]


def test_the_order_is_compared_where_the_calls_go_by_an_shm_ring(app_path: Path) -> None:
    """Whether a replica's calls come by an shm ring is the connection's: a binding's
    own ``transport = "shm"`` over a module of TCP, or a replica that offers no shm to a
    run of it (reached over TCP). The module's transport alone was looked at: the first
    was never said, the second said for calls that no ring ran as they came."""
    one, prio = "modules.s.define.f.pool=1", 'modules.s.define.f.priority="x"'
    theirs = _app(app_path, one).modules["s"]
    tcp = _app(app_path, one, prio).modules["s"]
    shm = _app(app_path, one, prio, 'modules.s.transport="shm"').modules["s"]
    workers = [(n, applied(theirs, n)) for n in ("s-0", "s-1")]
    [d] = differences(tcp, workers, rings={"s-1"})
    assert (d.key, d.text()) == ("priority", "s-1 has as they come where this run's "
                                 "configuration gives ordered")
    assert differences(shm, workers, rings=set()) == []
    assert [d.key for d in differences(shm, workers)] == ["priority"]  # (its own rings)


def test_the_order_is_not_compared_where_the_run_coalesces(app_path: Path) -> None:
    """A run's ``coalesce`` over shm is asked of each replica's ring (client/dialing.py
    `tune`), and a replica whose ring holds its bells back runs no burst as it comes
    (worker/direct.py): its calls wait in its queue, in their priorities' order. Such
    replicas were said to run them as they come. (Their spin is their own: said.)"""
    one, shm = "modules.s.define.f.pool=1", 'modules.s.transport="shm"'
    theirs = _app(app_path, one, shm).modules["s"]
    ours = _app(app_path, one, shm, 'modules.s.define.f.priority="x"',
                'modules.s.coalesce="1ms"').modules["s"]
    found = differences(ours, [("s-0", applied(theirs, "s-0"))])
    assert [d.key for d in found] == ["spin"]


def test_a_long_value_is_said_cut_short_with_its_length() -> None:
    """A peer's value was printed whole in the warning: up to the registry's 16 KiB of a
    setting (a worker by hand, or anything holding the token, registers what it likes)."""
    long = "7" * 5000
    text = Differs("cpus", {"server-0": (long, "0")}).text()
    assert len(text) < 300, len(text)
    assert text.startswith("server-0 has " + "7" * 60) and "(5000 characters)" in text, text
    assert text.endswith("where this run's configuration gives 0"), text
    assert Differs("cpus", {"server-0": ("1", "0")}).text() == (
        "server-0 has 1 where this run's configuration gives 0")
