"""Engines a configuration names: refused clearly when they cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigError

APP = Path(__file__).parent / "apps" / "procpool" / "app.toml"


@pytest.mark.parametrize("engine", ["mpi", "ray"])
def test_engines_not_built_are_a_config_error_not_a_silent_local_run(engine: str) -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": engine})
    assert info.value.key == "cluster.engine"
    assert engine in str(info.value)


def test_hosts_engine_without_a_registry_says_what_is_missing() -> None:
    with pytest.raises(ConfigError) as info:
        polybus.run(APP, {"cluster.engine": "hosts"})
    assert info.value.key == "cluster.registry"
