"""``use.<name> = { forward = false }``: the switch for forwarding between stages."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import ConfigErrors, load

PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "dna" / "pipeline.toml"


def test_forward_is_on_by_default_and_can_be_turned_off() -> None:
    on = load(PIPELINE)
    assert all(u.forward for u in on.modules["client"].use.values())
    off = load(PIPELINE, ("modules.client.use.stage2.forward=false",))
    assert off.modules["client"].use["stage2"].forward is False
    assert off.modules["client"].use["stage3"].forward is True


def test_forward_must_be_a_boolean() -> None:
    with pytest.raises(ConfigErrors) as e:
        load(PIPELINE, ('modules.client.use.stage2.forward="no"',))
    assert "forward" in str(e.value)
