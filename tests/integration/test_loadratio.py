"""A load ratio's shares follow the replicas in configuration order; auto windows work."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.errors import ConfigWarning

APP = Path(__file__).parent / "apps" / "ratio" / "app.toml"


def test_loadratio_follows_configuration_order_not_name_order() -> None:
    with pytest.warns(ConfigWarning, match="replica 'alpha' of module 'server' has share 0"):
        r = polybus.run(APP)  # (that alpha idles is said, and is what this test wants)
    calls = {rep.name: rep.calls for rep in r.replicas}
    # "zeta" is first in the configuration, so it takes every call of "1:0" — though
    # "alpha" sorts first by name (the registry's order).
    assert calls == {"zeta": 40, "alpha": 0}
    assert [v[0] for v in r.result] == list(range(40))


def test_async_demand_auto_gives_the_same_answers() -> None:
    # (demand applies no load ratio, and says so rather than that alpha gets none)
    style = {"modules.client.use.who.callstyle": "async-demand(auto)"}
    with pytest.warns(ConfigWarning, match="loadratio has no effect under callstyle") as said:
        r = polybus.run(APP, style)
    assert not any("gets none" in str(w.message) for w in said)
    assert [v[0] for v in r.result] == list(range(40))
    assert sum(rep.calls for rep in r.replicas) == 40
