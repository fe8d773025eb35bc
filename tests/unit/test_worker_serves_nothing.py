"""A worker of ``--module FILE`` whose module has no function to serve (only a class,
only functions imported from another module, only private ones) is refused as it
starts, saying what a worker serves. It said "polybus worker x: serving  at
tcp://...", registered, and served nothing for ever."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.cli.main import main


@pytest.mark.parametrize("source", [
    "x = 1\n",
    "class Counter:\n    def add(self, n):\n        return n\n",
    "from os.path import join\n\n\ndef _private():\n    return 1\n",
])
def test_a_module_with_no_function_to_serve_is_refused(
        source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POLYBUS_TOKEN", "x" * 32)
    module = tmp_path / "store.py"
    module.write_text(source)
    # (refused before the registry is dialled: none listens on port 1)
    assert main(["worker", "--registry", "127.0.0.1:1", "--module", str(module)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polybus worker: error: module 'store' ({module}) has no "
                          "function to serve: a worker serves each top-level def of its "
                          "module whose name does not start with '_'"), err
