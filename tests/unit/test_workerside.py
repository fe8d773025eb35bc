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
    (['modules.s.replication="alpha,beta"'], ["modules.s.replication"]),
    (["modules.s.define.g.cache_bytes=\"1MiB\""], ["modules.s.define.g.cache_bytes"]),
])
def test_replica_side_overrides_are_named(app_path: Path, sets: list[str],
                                          changed: list[str]) -> None:
    assert worker_side_changes(load(app_path), load(app_path, sets)) == changed


@pytest.mark.parametrize("sets", [
    [],
    ["modules.s.replication=4"],           # the count is the client's (it warns if short)
    ["modules.s.replication=1"],
    ["modules.s.define.f.pool=2"],         # the value the file has
    ["modules.s.define.f.timeout=\"2s\""],  # applied by the client
    ["modules.s.define.f.idempotent=false"],
    ["modules.s.define.g.idempotent=false"],  # a new interface at its defaults otherwise
    ["modules.c.use.f.callstyle=async"],
])
def test_client_side_overrides_are_not(app_path: Path, sets: list[str]) -> None:
    assert worker_side_changes(load(app_path), load(app_path, sets)) == []
