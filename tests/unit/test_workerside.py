"""Which overrides a hand-started worker would have to apply itself (config/workerside.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import load
from polybus.config.workerside import worker_side_changes


@pytest.fixture
def app_path(tmp_path: Path) -> Path:
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n\n\ndef g(x):\n    return x\n")
    (tmp_path / "c.py").write_text("def main():\n    return 1\n")
    path = tmp_path / "app.toml"
    path.write_text('[modules.s]\nsource = "s.py"\nreplication = 2\n'
                    'define.f = { pool = 2 }\n'
                    '[modules.c]\nsource = "c.py"\nentrypoint = "main"\n'
                    '[bind]\n"c.f" = "s.f"\n')
    return path


@pytest.mark.parametrize(("sets", "changed"), [
    (["modules.s.define.f.pool=4"], ["modules.s.define.f.pool"]),
    (["modules.s.define.f={pool=2, queue=5, overflow=\"reject\"}"],
     ["modules.s.define.f.queue", "modules.s.define.f.overflow"]),
    (['modules.s.replication="s-0:speed=0.5,s-1"'], ["modules.s.replication"]),
    (['modules.s.replication="s-1:speed=0.5"'], ["modules.s.replication"]),
    (['modules.s.replication="alpha:speed=0.5,beta"'], ["modules.s.replication"]),
    (["modules.s.define.g.cache_bytes=\"1MiB\""], ["modules.s.define.g.cache_bytes"]),
])
def test_replica_side_overrides_are_named(app_path: Path, sets: list[str],
                                          changed: list[str]) -> None:
    assert worker_side_changes(load(app_path), load(app_path, sets)) == changed


@pytest.mark.parametrize("sets", [
    [],
    ["modules.s.replication=4"],           # the count is the client's (it warns if short)
    ["modules.s.replication=1"],
    # names choose which of the registered replicas the run uses (client/choosing.py):
    # `--set 'modules.s.replication="s-1"'` picks s-1, and was said to reach no worker
    ['modules.s.replication="s-1"'],
    ['modules.s.replication="s-1,s-0"'],
    ['modules.s.replication="alpha,beta"'],
    ['modules.s.replication="s-0:speed=1,s-1"'],  # (the speed they have)
    ["modules.s.define.f.pool=2"],         # the value the file has
    ["modules.s.define.f.timeout=\"2s\""],  # applied by the client
    ["modules.s.define.f.idempotent=false"],
    ["modules.s.define.g.idempotent=false"],  # a new interface at its defaults otherwise
    ["modules.c.use.f.callstyle=async"],
])
def test_client_side_overrides_are_not(app_path: Path, sets: list[str]) -> None:
    assert worker_side_changes(load(app_path), load(app_path, sets)) == []


def test_a_run_warns_of_a_speed_alone(app_path: Path) -> None:
    """What `polybus run --registry` (and `polybus.run`, as a ConfigWarning) says of an
    override of ``replication``: nothing of names, which pick the replicas; of a speed,
    that it does not reach the workers, and that the names do choose."""
    import warnings

    from polybus.config.origin import SET
    from polybus.errors import ConfigWarning
    from polybus.runner import warn_unapplied

    def said(*sets: str) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_unapplied(app_path, load(app_path, sets, SET), SET)
        assert all(issubclass(w.category, ConfigWarning) for w in caught)
        return [str(w.message) for w in caught]

    assert said('modules.s.replication="s-1"') == []
    [speed] = said('modules.s.replication="s-1:speed=0.5"')
    assert "modules.s.replication: --set changes a replica's speed" in speed
    assert "the speed does not reach them" in speed and "they choose which" in speed
    [pool] = said("modules.s.define.f.pool=4")
    assert "modules.s.define.f.pool: --set changes a setting the replicas apply" in pool
