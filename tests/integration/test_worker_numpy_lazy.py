"""A replica whose module and calls use no array never imports numpy (polybus/
lazynumpy.py: its import was a third of a worker's start); an array that does come is
still made, by numpy imported then, and an array answered goes back as one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import sys

    def probe():
        return "numpy" in sys.modules

    def twice(a):
        return ["numpy" in sys.modules, type(a).__name__, a * 2]
"""

CLIENT = """
    import numpy as np
    from polybus import use, wait

    probe = use("probe")
    twice = use("twice")

    def main(n):
        before = [wait(probe()) for _ in range(3)]
        small = wait(twice(np.arange(10)))    # (in the frame's header)
        large = wait(twice(np.ones(n)))       # (beside it: by segment over shm)
        return {"before": before, "small": small, "large": large, "after": wait(probe())}
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 1

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [300000]

    [bind]
    "client.probe" = "server.probe"
    "client.twice" = "server.twice"
"""


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_numpy_is_imported_by_a_replica_only_for_an_array(tmp_path: Path, transport: str
                                                          ) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=TOML)
    got = polybus.run(app, {"modules.server.transport": transport}).result
    assert got["before"] == [False, False, False]  # plain calls: never imported
    imported, kind, doubled = got["small"]
    assert imported and kind == "ndarray"
    assert isinstance(doubled, np.ndarray) and doubled.tolist() == list(range(0, 20, 2))
    imported, kind, doubled = got["large"]
    assert imported and kind == "ndarray"
    assert isinstance(doubled, np.ndarray) and doubled.shape == (300000,)
    assert bool((doubled == 2).all())
    assert got["after"] is True
