"""A misspelt declaration of CORD's MIL (``pattern``, ``accepts``, ``returns``,
``interface``: read, not used) was reported as an unknown key of the TOML table with its
valid keys listed, ``pattern`` not among them, though the file's own other interfaces
use it: now it is named as the declaration it was likely meant to be, at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

MIL = """module client {{
    source = "client.py" ::
    entrypoint = "main" ::
    use interface f
        : callstyle = "async"
        : {attribute} = {{ integer }} ::
}}

module server {{
    source = "server.py" ::
    define interface f : replication = 2 ::
}}

module app {{
    instance client ::
    instance server ::
    bind client f server f ::
}}
"""


@pytest.mark.parametrize(("attribute", "meant"), [("patern", "pattern"),
                                                  ("accept", "accepts"),
                                                  ("retruns", "returns")])
def test_a_misspelt_declaration_is_named(tmp_path: Path, attribute: str, meant: str) -> None:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text('from polybus import use\n\nf = use("f")\n\n\n'
                                        "def main():\n    return f(1)\n")
    cfg = tmp_path / "app.cfg"
    cfg.write_text(MIL.format(attribute=attribute))
    _, errors = validate(cfg)
    said = [str(e) for e in errors]
    assert len(said) == 1, said
    assert f"did you mean '{meant}'?" in said[0], said
    assert said[0].startswith(f"{cfg}:6:"), said


def test_a_declaration_spelt_right_is_read_and_left_out(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "client.py").write_text('from polybus import use\n\nf = use("f")\n\n\n'
                                        "def main():\n    return f(1)\n")
    cfg = tmp_path / "app.cfg"
    cfg.write_text(MIL.format(attribute="pattern"))
    config, errors = validate(cfg)
    assert errors == [] and config is not None
