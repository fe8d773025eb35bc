"""A worker's working directory is the run's, not the configuration's or the module's,
and the module's folder is on its sys.path (docs/guide.md, docs/configuration.md): a
file beside the module is imported from anywhere, a relative file name is not found."""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import os
    from pathlib import Path

    import helper

    def where():
        return [os.getcwd(), helper.NAME, os.path.exists("data.txt"),
                (Path(__file__).parent / "data.txt").read_text()]
"""

CLIENT = """
    from polybus import use, wait

    where = use("where")

    def main():
        return wait(where())
"""

TOML = """
    [modules.server]
    source = "server.py"

    [modules.client]
    source = "client.py"
    entrypoint = "main"

    [bind]
    "client.where" = "server.where"
"""


@pytest.mark.timeout(60)
def test_a_worker_runs_in_the_runs_directory(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    app = write_app(tmp_path / "app", server=SERVER, client=CLIENT, toml=TOML)
    (app.parent / "helper.py").write_text("NAME = 'helper'\n")
    (app.parent / "data.txt").write_text("beside the module")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert polybus.run(app, worker_output=False).result == [
        str(elsewhere.resolve()), "helper", False, "beside the module"]
