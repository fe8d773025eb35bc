"""What `check` does not refuse of the calls of a use()d name (config/callargs.py): a
call it cannot be sure fails, and any call of a binding the configuration tells it to
leave alone (``use.<name>.check_calls = false``), since a wrong refusal would otherwise
stop a valid program with no way to run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate
from polybus.testing.apps import write_bound_app

CLIENT = """\
from polybus import use
render = use("render")


def main(fancy=False):
    if fancy:  # (never, as configured: the program runs)
        return render(2, gain=3.0, quality="high")
    return render(2, gain=3.0)
"""


def _found(tmp_path: Path, server: str, client: str = CLIENT, use: str = "",
           mil: str | None = None) -> list[str]:
    """The problems `validate` finds in the program (``mil``: configured by that MIL
    text instead of a TOML with ``use`` added to the client's table)."""
    path = write_bound_app(tmp_path, server=server, client=client, names=("render",),
                           server_keys="replication = 1", client_keys=use)
    if mil is not None:
        path = tmp_path / "app.cfg"
        path.write_text(mil)
    config, found = validate(str(path))
    assert (config is None) == bool(found)
    return [str(e) for e in found]


SERVER = "def render(tile, gain=1.0):\n    return tile * gain\n"


def test_the_refusal_says_how_to_leave_the_binding_unchecked(tmp_path: Path) -> None:
    [said] = _found(tmp_path, SERVER)
    assert said.endswith("got an unexpected keyword argument 'quality' (if the run never "
                         "makes this call as written: modules.client.use.render.check_calls "
                         "= false)")


@pytest.mark.parametrize("use", ["use.render = { check_calls = false }",
                                 'use.render = { callstyle = "async", check_calls = false }'])
def test_check_calls_false_leaves_the_bindings_calls_alone(tmp_path: Path, use: str) -> None:
    assert _found(tmp_path, SERVER, use=use) == []


def test_check_calls_true_or_left_out_checks_them(tmp_path: Path) -> None:
    assert len(_found(tmp_path, SERVER, use="use.render = { check_calls = true }")) == 1
    assert _found(tmp_path, SERVER, client=CLIENT.replace(', quality="high"', "")) == []


def test_check_calls_takes_a_boolean(tmp_path: Path) -> None:
    found = _found(tmp_path, SERVER, use='use.render = { check_calls = "no" }')
    assert any("modules.client.use.render.check_calls: expected true or false" in s
               for s in found), found


def test_check_calls_in_mil(tmp_path: Path) -> None:
    cfg = """\
module client {
    source = "client.py" ::
    entrypoint = "main" ::
    use interface render : check_calls = false ::
}
module server {
    source = "server.py" ::
    define interface render ::
}
module app {
    instance client ::
    instance server ::
    bind client render server render ::
}
"""
    assert _found(tmp_path, SERVER, mil=cfg) == []
    [said] = _found(tmp_path, SERVER,
                    mil=cfg.replace(" : check_calls = false", ""))
    assert said.endswith("(if the run never makes this call as written: add ': "
                         "check_calls = false' to module client's 'use interface render' "
                         "statement, or the statement 'use interface render : check_calls "
                         "= false ::')")


@pytest.mark.parametrize("after", [
    'globals()["render"] = _render2',
    "import sys\nsetattr(sys.modules[__name__], 'render', _render2)",
    "vars()['render'] = _render2",
    "exec('render = _render2')",
    "from fast import *",  # (fast.py's render, imported over the def)
])
def test_a_served_module_that_rebinds_through_its_namespace_is_not_checked(
        tmp_path: Path, after: str) -> None:
    # (the reader cannot see what the replica calls: render is then _render2)
    server = ("def render(tile):\n    return tile\n\n\n"
              "def _render2(tile, gain=1.0, quality='low'):\n    return tile * gain\n\n\n"
              f"{after}\n")
    (tmp_path / "fast.py").write_text("def render(tile, gain=1.0, quality='low'):\n"
                                      "    return tile\n")
    assert _found(tmp_path, server) == []


@pytest.mark.parametrize(("signature", "attr"), [
    ("(tile, gain)", "__defaults__ = (1.0,)"),
    ("(tile, *, gain)", "__kwdefaults__ = {'gain': 1.0}"),
    ("(tile, gain)", "__code__ = _render2.__code__"),
    ("(tile, gain)", "__doc__ = ''\nsetattr(render, '__defaults__', (1.0,))"),
])
def test_a_served_function_whose_parameters_are_set_later_is_not_checked(
        tmp_path: Path, signature: str, attr: str) -> None:
    server = (f"def render{signature}:\n    return tile\n\n\n"
              "def _render2(tile, gain=1.0):\n    return tile * gain\n\n\n"
              f"render.{attr}\n")
    client = CLIENT.replace('render(2, gain=3.0)\n', 'render(2)\n')
    [said] = _found(tmp_path, SERVER, client=client)  # (the fancy call: checked, refused)
    assert "unexpected keyword argument 'quality'" in said
    assert _found(tmp_path, server, client=client.replace(', quality="high"', "")) == []


def test_a_client_that_rebinds_through_its_namespace_is_not_followed(tmp_path: Path) -> None:
    client = CLIENT.replace("def main", "def _fancy(tile, gain=1.0, quality='low'):\n"
                            "    return tile\n\n\ndef main").replace(
        "    if fancy:", '    globals()["render"] = _fancy\n    if True:')
    assert _found(tmp_path, SERVER, client=client) == []
