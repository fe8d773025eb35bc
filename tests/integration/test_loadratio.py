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


def test_async_demand_auto_measures_every_call_from_its_sending(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The calls placed at once (the first window's) kept sent_at 0.0 and ahead 0, so the
    # estimator took the time since the machine's boot (perf_counter) as a call's service
    # time and round trip: tens of thousands of seconds, which the smoothing took about
    # a hundred answers per replica to forget, the window meanwhile a ratio of two such.
    from polybus.client.policies import balance

    seen: list[tuple[float, int, float]] = []
    observe = balance.WindowEstimator.observe

    def watched(self: balance.WindowEstimator, sent_at: float, ahead: int,
                done_at: float) -> int:
        seen.append((sent_at, ahead, done_at))
        return observe(self, sent_at, ahead, done_at)

    monkeypatch.setattr(balance.WindowEstimator, "observe", watched)
    style = {"modules.client.use.who.callstyle": "async-demand(auto)"}
    with pytest.warns(ConfigWarning, match="loadratio has no effect under callstyle"):
        r = polybus.run(APP, style)
    assert [v[0] for v in r.result] == list(range(40))
    assert len(seen) == 40
    for sent_at, ahead, done_at in seen:
        assert 0 < done_at - sent_at < 60, (sent_at, done_at)  # (the run's own seconds)
        assert ahead >= 1
