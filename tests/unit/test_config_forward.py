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


def test_forward_keep_is_accepted_and_a_misspelling_is_refused_naming_the_key() -> None:
    kept = load(PIPELINE, ('modules.client.use.stage2.forward="keep"',
                           'modules.client.use.stage2.callstyle="async"'))
    assert kept.modules["client"].use["stage2"].forward == "keep"
    with pytest.raises(ConfigErrors) as e:
        load(PIPELINE, ('modules.client.use.stage2.forward="kep"',))
    text = str(e.value)
    assert "modules.client.use.stage2.forward" in text and "did you mean 'keep'?" in text, text


@pytest.mark.parametrize("other", ['callstyle="async-demand(2)"', "aggregate=4",
                                   'callstyle="sync"', 'balance="steal"'])
def test_forward_keep_is_refused_beside_what_it_does_not_work_with(other: str) -> None:
    with pytest.raises(ConfigErrors) as e:
        load(PIPELINE, ('modules.client.use.stage2.forward="keep"',
                        'modules.client.use.stage2.callstyle="async"',
                        f"modules.client.use.stage2.{other}"))
    text = str(e.value)
    assert "forward = \"keep\" is for plain async calls" in text, text
    assert "modules.client.use.stage2.forward" in text, text


def test_forward_keep_is_refused_for_a_module_with_migration_paths() -> None:
    with pytest.raises(ConfigErrors) as e:
        load(PIPELINE, ('modules.client.use.stage2.forward="keep"',
                        'modules.part2.replication="a#b:[1/2]"'))
    text = str(e.value)
    assert "module 'part2' has migration paths" in text, text
    assert "modules.client.use.stage2.forward" in text, text


def test_forward_keep_is_refused_beside_stealing_by_another_binding_to_its_module(
        tmp_path: Path) -> None:
    # Review: links are per module, shared by its bindings; a Steal asks a replica for
    # any queued calls on that connection, so another binding's balance = "steal" moves
    # the keep binding's calls too (Migrator.released re-sends them). Only this binding's
    # own balance is looked at (forwardopt.refuse_keep).
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n\ndef g(x):\n    return x\n")
    (tmp_path / "client.py").write_text("def main():\n    return None\n")
    (tmp_path / "app.toml").write_text(
        '[modules.server]\nsource = "server.py"\nreplication = 2\n'
        'define.f = {}\ndefine.g = {}\n\n'
        '[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
        'use.f = { callstyle = "async", forward = "keep" }\n'
        'use.g = { callstyle = "async", balance = "steal" }\n\n'
        '[bind]\n"client.f" = "server.f"\n"client.g" = "server.g"\n')
    with pytest.raises(ConfigErrors) as e:
        load(tmp_path / "app.toml")
    assert "modules.client.use.f.forward" in str(e.value)
