"""`polybus check` refuses a call of a use()d name that the served function cannot take,
at the call's line, and `polybus run` refuses it the same way before any replica starts
(a new user's render(t, gian=2.0) passed check and failed only under run)."""

from __future__ import annotations

from pathlib import Path

from integration.conftest import cli
from polybus.testing.apps import write_app

SERVER = """\
def render(tile, gain):
    return tile * gain
"""
CLIENT = """\
from polybus import use
render = use("render")


def main():
    t = 3
    return render(t, gian=2.0)
"""
TOML = """\
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.render" = "server.render"
"""
SAID = ("client.py:7: the call render(t, gian=2.0) does not fit render(tile, gain), "
        "defined at server.py:1: got an unexpected keyword argument 'gian' (did you mean "
        "'gain'?)")


def test_check_and_run_refuse_a_misspelt_keyword_at_its_call(tmp_path: Path) -> None:
    write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    p = cli("check", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [f"error: {SAID}", "1 problem(s) found checking app.toml"]
    p = cli("run", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [f"polybus run: error: {SAID}"], p.stderr
    (tmp_path / "client.py").write_text(CLIENT.replace("gian", "gain"))
    p = cli("check", "--no-import", "app.toml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr


FANCY = """\
from polybus import use
render = use("render")


def main(fancy=False):
    if fancy:
        return render(2, 3.0, quality="high")
    return render(2, 3.0)
"""


def test_a_binding_left_unchecked_runs(tmp_path: Path) -> None:
    """A call the run never makes (a branch its arguments never take) is refused, saying
    how to leave the binding unchecked; so left, the program runs."""
    write_app(tmp_path, server=SERVER, client=FANCY, toml=TOML)
    p = cli("check", "--no-import", "app.toml", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[0].endswith(
        "got an unexpected keyword argument 'quality' (if the run never makes this call "
        "as written: modules.client.use.render.check_calls = false)"), p.stderr
    p = cli("run", "app.toml", "--set", "modules.client.use.render.check_calls=false",
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "6.0"
