"""Ctrl-C while `polybus` is still starting (its modules importing, the first 0.3 s):
the one line "interrupted" and status 130 a later Ctrl-C gives, not a traceback of
imports. Made deterministic by an import hook that raises KeyboardInterrupt when a
given module is imported, as a SIGINT arriving then would."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")

# Installed before polybus is imported; then polybus starts as the console script does
# (`from polybus.cli.main import main; sys.exit(main())`) or as `python -m polybus`.
HOOK = """\
import sys
class Stop:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Stop())
sys.argv = ["polybus", *{argv!r}]
"""
STARTS = {
    "script": "from polybus.cli.main import main\nsys.exit(main())\n",
    "-m": "import runpy\nrunpy.run_module('polybus', run_name='__main__', alter_sys=True)\n",
}


def _start(how: str, module: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    code = HOOK.format(module=module, argv=argv) + STARTS[how]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("how", sorted(STARTS))
@pytest.mark.parametrize(("module", "argv"), [
    ("msgspec", ["check", "--no-import", "app.toml"]),  # (what the configuration pulls in)
    ("polybus.cli.cmd_sweep", ["sweep", "app.toml"]),  # (a subcommand's module)
    ("polybus.config", ["run", "app.toml"]),
])
def test_ctrl_c_while_starting_says_interrupted_and_exits_130(how: str, module: str,
                                                               argv: list[str]) -> None:
    p = _start(how, module, argv)
    assert "Traceback" not in p.stderr, p.stderr
    assert (p.returncode, p.stderr.strip()) == (130, "polybus: interrupted")


def test_the_entry_point_imports_no_client_modules() -> None:
    """What runs before main()'s first line can take no Ctrl-C: only light modules."""
    code = textwrap.dedent("""\
        import sys
        from polybus.cli.main import main
        import polybus
        heavy = [m for m in ("numpy", "polybus.client", "polybus.config", "polybus.runner")
                 if m in sys.modules]
        print(heavy)
        from polybus import use, wait, as_completed, broadcast, Promise, RunResult
        print(use.__module__, polybus.wait is wait, "use" in dir(polybus))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert p.stdout.splitlines() == ["[]", "polybus.client.stubs True True"], p.stderr


def test_main_called_with_a_ctrl_c_in_its_imports_returns_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli.main import main

    class Stop:
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "polybus.cli.cmd_check":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "polybus.cli.cmd_check", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Stop(), *sys.meta_path])
    try:
        rc = main(["check", "app.toml"])
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C while the subcommands' modules imported escaped main()")
    assert (rc, capsys.readouterr().err) == (130, "polybus: interrupted\n")
